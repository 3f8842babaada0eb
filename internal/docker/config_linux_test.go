package docker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// testBox is a box of a Runtime talking to f, with image as --image
// ("" for Warden's own root, whose template binds /usr and /etc/ssl),
// shown two CPUs. Its directory is made, empty, in a test directory.
func testBox(t *testing.T, f *memEngine, image string) *box {
	t.Helper()
	// prepare writes the template whatever the image.
	r := &Runtime{Image: image, engine: f, image: image, tmpl: rootfs.Template{Dir: t.TempDir(), Binds: []string{"/usr", "/etc/ssl"}}}
	if image == "" {
		r.image = "warden-root:0123"
	}
	b := &box{r: r, name: "warden-test", image: r.image, dir: filepath.Join(t.TempDir(), "box"), exited: make(chan struct{})}
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b.view = boxView{binds: []string{"/s/view/meminfo:/proc/meminfo:ro"}, cpuset: "0,1", cpus: 2}
	return b
}

// TestConfigLimits: each limit of the spec reaches the create request
// as the engine's field, and a limit not set sets nothing.
func TestConfigLimits(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name   string
		limits spec.Limits
		want   HostConfig // only the limit fields are compared
	}{
		{"none", spec.Limits{}, HostConfig{CpusetCpus: "0,1"}},
		{"memory", spec.Limits{MemoryBytes: 256 * mib}, HostConfig{Memory: 256 * mib, MemorySwap: 256 * mib, CpusetCpus: "0,1"}},
		{"half a cpu", spec.Limits{CPUs: 0.5}, HostConfig{NanoCPUs: 5e8, CpusetCpus: "0,1"}},
		{"one and a half cpus", spec.Limits{CPUs: 1.5}, HostConfig{NanoCPUs: 15e8, CpusetCpus: "0,1"}},
		{"all the cpus shown", spec.Limits{CPUs: 2}, HostConfig{NanoCPUs: 2e9, CpusetCpus: "0,1"}},
		{"more cpus than shown", spec.Limits{CPUs: 64}, HostConfig{NanoCPUs: 2e9, CpusetCpus: "0,1"}},
		{"pids", spec.Limits{Pids: 100}, HostConfig{PidsLimit: 100 + initTasks, CpusetCpus: "0,1"}},
		{"all", spec.Limits{MemoryBytes: mib, CPUs: 1, Pids: 1},
			HostConfig{Memory: mib, MemorySwap: mib, NanoCPUs: 1e9, PidsLimit: 1 + initTasks, CpusetCpus: "0,1"}},
	}
	for _, tt := range tests {
		b := testBox(t, newMemEngine(), "")
		got := b.config(spec.Spec{Limits: tt.limits}, "/lib/init", "/s", "/s/run").HostConfig
		if got.Memory != tt.want.Memory || got.MemorySwap != tt.want.MemorySwap || got.NanoCPUs != tt.want.NanoCPUs ||
			got.PidsLimit != tt.want.PidsLimit || got.CpusetCpus != tt.want.CpusetCpus {
			t.Errorf("%s: memory %d swap %d nanocpus %d pids %d cpuset %q, want %d %d %d %d %q", tt.name,
				got.Memory, got.MemorySwap, got.NanoCPUs, got.PidsLimit, got.CpusetCpus,
				tt.want.Memory, tt.want.MemorySwap, tt.want.NanoCPUs, tt.want.PidsLimit, tt.want.CpusetCpus)
		}
	}
}

// selfLabel is this process's owner identity, as Label's value.
func selfLabel(t *testing.T) string {
	me, err := boxname.Self()
	if err != nil {
		t.Fatalf("boxname.Self: %v", err)
	}
	return me.String()
}

// TestConfigConfines: whatever the spec, the container is Warden's init
// as uid 0 with only the init's capabilities, no new privileges,
// Docker's default seccomp profile (no unconfined option), a read-only
// root, no network, its own IPC and cgroup namespaces, and Warden's label.
func TestConfigConfines(t *testing.T) {
	b := testBox(t, newMemEngine(), "")
	c := b.config(spec.Spec{}, "/lib/init", "/s", "/s/run")
	hc := c.HostConfig
	checks := []struct {
		name      string
		got, want any
	}{
		{"image", c.Image, "warden-root:0123"},
		{"user", c.User, "0:0"},
		{"entrypoint", strings.Join(c.Entrypoint, " "), nsinit.BoxedPath + " " + nsinit.BoxedConnect + " " + controlDir + "/ctl.sock"},
		{"cmd", len(c.Cmd), 0},
		{"network disabled", c.NetworkDisabled, true},
		{"network mode", hc.NetworkMode, "none"},
		{"ipc", hc.IpcMode, "private"},
		{"cgroupns", hc.CgroupnsMode, "private"},
		{"cap drop", strings.Join(hc.CapDrop, ","), "ALL"},
		{"cap add", strings.Join(hc.CapAdd, ","), "SETUID,SETGID,KILL,SETPCAP"},
		{"security opts", strings.Join(hc.SecurityOpt, ","), "no-new-privileges"},
		{"read-only root", hc.ReadonlyRootfs, true},
		{"label", c.Labels[Label], selfLabel(t)},
		{"labels", len(c.Labels), 1},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// TestConfigMasks: /sys, /dev/mqueue, every path native masks in /proc
// and every view file runc will not bind are masked; /proc's kernel-wide
// settings are read-only.
func TestConfigMasks(t *testing.T) {
	hc := testBox(t, newMemEngine(), "").config(spec.Spec{}, "/lib/init", "/s", "/s/run").HostConfig
	want := append([]string{"/sys", "/dev/mqueue"}, unbindableView()...)
	for _, p := range rootfs.MaskedProcPaths {
		want = append(want, "/proc/"+p)
	}
	for _, p := range want {
		if !slices.Contains(hc.MaskedPaths, p) {
			t.Errorf("MaskedPaths = %v, want %s in it", hc.MaskedPaths, p)
		}
	}
	for _, p := range rootfs.ReadonlyProcPaths {
		if !slices.Contains(hc.ReadonlyPaths, "/proc/"+p) {
			t.Errorf("ReadonlyPaths = %v, want /proc/%s in it", hc.ReadonlyPaths, p)
		}
	}
	if len(rootfs.ReadonlyProcPaths) == 0 || len(rootfs.MaskedProcPaths) == 0 {
		t.Errorf("rootfs lists no paths to mask or to make read-only; the test checks nothing")
	}
}

// TestConfigBinds: the box gets the init, the control socket's
// directory, its hostname and its view read-only, the scratch
// directories read-write, the template's directories only with Warden's
// own image, and nothing else.
func TestConfigBinds(t *testing.T) {
	for _, image := range []string{"", "python:3.12"} {
		b := testBox(t, newMemEngine(), image)
		binds := b.config(spec.Spec{}, "/lib/init", "/s", "/s/run").HostConfig.Binds
		want := []string{
			"/lib/init:" + nsinit.BoxedPath + ":ro", "/s/run:" + controlDir + ":ro",
			"/s/hostname:/etc/hostname:ro", "/s/view/meminfo:/proc/meminfo:ro",
		}
		for name, dst := range rootfs.ScratchDirs {
			want = append(want, "/s/"+name+":"+dst+":rw")
		}
		if image == "" {
			want = append(want, "/usr:/usr:ro", "/etc/ssl:/etc/ssl:ro")
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(binds))
		if !slices.Equal(got, want) {
			t.Errorf("image %q: binds\n%v\nwant\n%v", image, got, want)
		}
	}
}

// TestQuotaAboveTheHostsCPUs: a quota above the CPUs Warden may use
// (which the engine refuses above the host's core count) becomes the
// quota of the cpuset the box is given, every one of Warden's CPUs.
func TestQuotaAboveTheHostsCPUs(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	l := spec.Limits{CPUs: float64(set.Count() + 62)}
	b := testBox(t, newMemEngine(), "")
	var err error
	if b.view, err = makeView(t.TempDir(), l); err != nil {
		t.Fatal(err)
	}
	got := b.config(spec.Spec{Limits: l}, "/lib/init", "/s", "/s/run").HostConfig
	if want := int64(set.Count()) * 1e9; got.NanoCPUs != want || b.view.cpus != set.Count() {
		t.Errorf("--cpus %g with %d CPUs allowed: NanoCPUs %d over %d CPUs (%q), want %d over %d",
			l.CPUs, set.Count(), got.NanoCPUs, b.view.cpus, got.CpusetCpus, want, set.Count())
	}
}
