package gvisor

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestBundleSpec checks the parts of the OCI spec the box's safety rests
// on: a read-only root, no privilege gain, only the init's kept
// capabilities, parents mounted before children, and the limits.
func TestBundleSpec(t *testing.T) {
	l := spec.DefaultLimits
	b := Bundle{
		Root: "/r", Binds: []string{"/usr", "/etc/ssl/certs"}, Scratch: "/s",
		ScratchDirs: map[string]string{"shm": "/dev/shm", "workspace": "/workspace"},
		Init:        "/bin/warden", InitPath: "/.warden/warden-init", Args: []string{"/.warden/warden-init", "stdin"},
		CgroupsPath: "/warden/x", Limits: l,
	}
	s := b.Spec()
	if !s.Root.Readonly {
		t.Error("root is writable, want read-only")
	}
	if !s.Process.NoNewPrivileges {
		t.Error("noNewPrivileges is off")
	}
	if got, want := len(s.Process.Capabilities.Bounding), len(keptCaps); got != want {
		t.Errorf("bounding set has %d capabilities, want %d", got, want)
	}
	seen := map[string]int{}
	for i, m := range s.Mounts {
		seen[m.Destination] = i
	}
	if seen["/dev"] > seen["/dev/shm"] {
		t.Errorf("/dev mounted after /dev/shm: %v", s.Mounts)
	}
	for _, p := range []string{"/usr", "/etc/ssl/certs", "/.warden/warden-init"} {
		m := s.Mounts[seen[p]]
		if m.Destination != p || !contains(m.Options, "ro") {
			t.Errorf("mount %s = %+v, want a read-only bind", p, m)
		}
	}
	r := s.Linux.Resources
	if got := *r.Memory.Limit; got != l.MemoryBytes {
		t.Errorf("memory limit = %d, want %d", got, l.MemoryBytes)
	}
	if got := *r.Pids.Limit; got != l.Pids*hostTasksPerTask+sentryTasks {
		t.Errorf("pids limit = %d, want %d", got, l.Pids*hostTasksPerTask+sentryTasks)
	}
	if got, want := *r.CPU.Quota, int64(l.CPUs*100000); got != want {
		t.Errorf("cpu quota = %d, want %d", got, want)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
