package docker

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

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

func TestMakeView(t *testing.T) {
	scratch := t.TempDir()
	bv, err := makeView(scratch, spec.Limits{CPUs: 1, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// One CPU of several is a cpuset of one; the only CPU needs none.
	if strings.Contains(bv.cpuset, ",") || (bv.cpuset != "") != (runtime.NumCPU() > 1) {
		t.Errorf("cpuset %q at --cpus 1 on %d CPUs: want one CPU (none if the host has one)", bv.cpuset, runtime.NumCPU())
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
	checks := map[string]string{"meminfo": "MemTotal:         262144 kB", "loadavg": "0.00 0.00 0.00 1/1 1", "stat": "cpu0 "}
	for name, want := range checks {
		got, err := os.ReadFile(filepath.Join(scratch, viewDir, name))
		if err != nil || !strings.Contains(string(got), want) {
			t.Errorf("%s: got %q, %v; want it to contain %q", name, got, err, want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(scratch, viewDir, "stat")); strings.Contains(string(got), "cpu1 ") {
		t.Errorf("stat at --cpus 1 lists a second CPU:\n%s", got)
	}
}
