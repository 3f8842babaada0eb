package nsinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestTakeMemoryEvents: the agent takes the descriptor the guest init
// passes (MemoryEventsFD) only if it is open on a cgroup v2 file that
// holds an oom_kill count, and makes it close-on-exec; a pipe, a closed
// descriptor or a plain file saying the same are refused.
func TestTakeMemoryEvents(t *testing.T) {
	v2 := testhost.CgroupV2(t)
	plain := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(plain, []byte("oom 0\noom_kill 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		open func(t *testing.T) int
		want string // in the error; "" for success
		// cloexec: the descriptor must be close-on-exec afterwards
		// (a cgroup v2 file is made so even when it is refused later).
		cloexec bool
	}{
		{"pipe", func(t *testing.T) int {
			var p [2]int
			if err := unix.Pipe2(p[:], 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
			return p[0]
		}, "not a cgroup v2 file", false},
		{"closed", func(t *testing.T) int {
			// Above the soft RLIMIT_NOFILE no descriptor can be open,
			// unlike a just-closed number the runtime may reuse.
			var lim unix.Rlimit
			if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
				t.Fatal(err)
			}
			return int(min(lim.Cur, 1<<30))
		}, "bad file descriptor", false},
		{"plain file", func(t *testing.T) int { return openFD(t, plain) }, "not a cgroup v2 file", false},
		{"cgroup v2 file without oom_kill", func(t *testing.T) int { return openFD(t, filepath.Join(v2, "cgroup.procs")) }, "no oom_kill line", true},
		{"memory.events", func(t *testing.T) int {
			p := memoryEventsBelow(testhost.CgroupV2Memory(t, "TestConformanceSessionOOM/microvm"))
			if p == "" {
				testhost.SkipOrFail(t, "no child of "+v2+" has memory.events")
			}
			return openFD(t, p)
		}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := tc.open(t)
			err := takeMemoryEvents(fd)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("takeMemoryEvents = %v, want %q", err, tc.want)
			}
			if !tc.cloexec {
				return
			}
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("descriptor flags after takeMemoryEvents = %#x, %v; want close-on-exec", flags, err)
			}
		})
	}
}

// openFD opens p without close-on-exec, as the guest init passes it,
// closed at the test's end.
func openFD(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// memoryEventsBelow is a memory.events file in a child of the cgroup v2
// root v2 (the root itself has none), or "".
func memoryEventsBelow(v2 string) string {
	m, _ := filepath.Glob(filepath.Join(v2, "*", "memory.events"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}
