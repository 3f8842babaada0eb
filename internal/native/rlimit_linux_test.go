package native

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestCheckHardLimits: open files and pids up to this process's hard
// limits pass; one more is refused as invalid with the bound and the
// rlimit named, as the init would fail to set it.
func TestCheckHardLimits(t *testing.T) {
	var files, procs unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &files); err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &procs); err != nil {
		t.Fatal(err)
	}
	if files.Max >= spec.MaxOpenFiles || procs.Max >= spec.MaxPids {
		t.Skipf("hard limits %d files, %d processes reach the spec's bounds: nothing to refuse", files.Max, procs.Max)
	}
	at := spec.Limits{OpenFiles: int64(files.Max), Pids: int64(procs.Max) - initTasks}
	if err := checkHardLimits(at, uint64(at.Pids)+initTasks); err != nil {
		t.Errorf("checkHardLimits() at the hard limits = %v, want nil", err)
	}
	tests := []struct {
		l     spec.Limits
		nproc uint64
		want  string
	}{
		{spec.Limits{OpenFiles: spec.MaxOpenFiles}, 0,
			fmt.Sprintf("open files %d is above %d, the hard RLIMIT_NOFILE this warden was started with", spec.MaxOpenFiles, files.Max)},
		{spec.Limits{Pids: spec.MaxPids}, spec.MaxPids,
			fmt.Sprintf("pids %d is above %d, the hard RLIMIT_NPROC", spec.MaxPids, procs.Max)},
		{spec.Limits{Pids: int64(procs.Max)}, procs.Max + initTasks,
			fmt.Sprintf("ask for at most %d", procs.Max-initTasks)},
	}
	for _, tt := range tests {
		err := checkHardLimits(tt.l, tt.nproc)
		if err == nil || !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkHardLimits(%+v) = %v, want ErrInvalid containing %q", tt.l, err, tt.want)
		}
	}
}
