package spawn

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// TestStartErrorUnexecutable: a warden-exec the kernel will not execute
// (gone, of another machine, on a noexec mount, being written) is "no
// executor", so auto takes the Go init; other failures, and the Go
// init's own, stay what they are.
func TestStartErrorUnexecutable(t *testing.T) {
	execErr := func(e syscall.Errno) error {
		return &fs.PathError{Op: "fork/exec", Path: "/proc/self/fd/256", Err: e}
	}
	tests := []struct {
		name string
		i    Init
		err  error
		want bool
	}{
		{"gone", Init{Exec: true}, execErr(syscall.ENOENT), true},
		{"another machine", Init{Exec: true}, execErr(syscall.ENOEXEC), true},
		{"noexec mount", Init{Exec: true}, execErr(syscall.EACCES), true},
		{"being written", Init{Exec: true}, execErr(syscall.ETXTBSY), true},
		{"other failure", Init{Exec: true}, execErr(syscall.EPERM), false},
		{"the Go init", Init{}, execErr(syscall.ENOEXEC), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StartError(tt.i, tt.err)
			if errors.Is(got, nsinit.ErrNoExecutor) != tt.want || !errors.Is(got, tt.err) {
				t.Errorf("StartError(%+v, %v) = %v; want matching ErrNoExecutor: %v, and the exec's error", tt.i, tt.err, got, tt.want)
			}
		})
	}
}
