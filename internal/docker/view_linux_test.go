package docker

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestEveryViewFileBoundOrMasked: a file the native view replaces shows
// the host's figure or id, so a box must have it bound or masked.
func TestEveryViewFileBoundOrMasked(t *testing.T) {
	masked := maskedPaths()
	for _, f := range rootfs.ProcView {
		bound := slices.Contains(procBindable, f.Name)
		if hidden := slices.Contains(masked, "/proc/"+f.Name); bound == hidden {
			t.Errorf("/proc/%s: bound %v, masked %v; want exactly one", f.Name, bound, hidden)
		}
	}
}

// TestMakeView: the view files are root's, mode 0444 and bound read-only
// whatever Warden's umask, count the box's CPUs, and confine it to
// ceil(--cpus) CPUs, or all of Warden's without a quota.
func TestMakeView(t *testing.T) {
	all, err := boxCPUs(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		umask int
		cpus  float64
		n     int
	}{
		{"umask 022, --cpus 1", 0o022, 1, 1},
		{"umask 077, --cpus 1", 0o077, 1, 1},
		{"no quota", 0o022, 0, len(all)},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := unix.Umask(c.umask)
			defer unix.Umask(old)
			checkView(t, c.cpus, c.n)
		})
	}
}

func checkView(t *testing.T, cpus float64, n int) {
	scratch := t.TempDir()
	bv, err := makeView(scratch, spec.Limits{CPUs: cpus, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(bv.cpuset, ","); len(got) != n {
		t.Errorf("cpuset %q at --cpus %v: want %d CPUs", bv.cpuset, cpus, n)
	}
	if st, err := os.Stat(filepath.Join(scratch, viewDir)); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v, %v; want mode 0755", viewDir, st, err)
	}
	if len(bv.binds) == 0 {
		t.Fatal("no binds")
	}
	for _, b := range bv.binds {
		f := strings.Split(b, ":")
		if len(f) != 3 || f[0] != filepath.Join(scratch, viewDir, filepath.Base(f[1])) || !strings.HasPrefix(f[1], "/proc/") || f[2] != "ro" {
			t.Errorf("bind %q: want <scratch>/view/NAME:/proc/NAME:ro", b)
			continue
		}
		if st, err := os.Stat(f[0]); err != nil || st.Mode().Perm() != 0o444 {
			t.Errorf("%s: %v, %v; want mode 0444", f[0], st, err)
		}
	}
	checks := map[string]string{"meminfo": "MemTotal:         262144 kB", "loadavg": "0.00 0.00 0.00 1/1 1", "stat": "cpu" + strconv.Itoa(n-1) + " "}
	for name, want := range checks {
		got, err := os.ReadFile(filepath.Join(scratch, viewDir, name))
		if err != nil || !strings.Contains(string(got), want) {
			t.Errorf("%s: got %q, %v; want it to contain %q", name, got, err, want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(scratch, viewDir, "stat")); strings.Contains(string(got), "cpu"+strconv.Itoa(n)+" ") {
		t.Errorf("stat at --cpus %v lists more than %d CPUs:\n%s", cpus, n, got)
	}
}
