package native

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/spawn"
)

// TestStartErrorNamesTheCause: an executor the kernel would not execute
// is said to be that, never a user namespace's refusal; a clone's EPERM
// still points at user namespaces.
func TestStartErrorNamesTheCause(t *testing.T) {
	execFail := &os.PathError{Op: "fork/exec", Path: "/proc/self/fd/256", Err: syscall.EACCES}
	for _, tt := range []struct {
		name   string
		err    error
		want   string
		userns bool
	}{
		{"warden-exec not executable", spawn.StartError(spawn.Init{Exec: true, Unshares: true}, execFail), "permission denied", false},
		{"clone refused", spawn.StartError(spawn.Init{}, &os.SyscallError{Syscall: "clone", Err: syscall.EPERM}), "user namespaces may be disabled", true},
	} {
		got := startError(tt.err).Error()
		if !strings.Contains(got, tt.want) || strings.Contains(got, "user namespaces") != tt.userns {
			t.Errorf("%s: startError = %q, want it to say %q (user namespaces named: %v)", tt.name, got, tt.want, tt.userns)
		}
	}
}
