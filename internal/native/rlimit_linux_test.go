package native

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestCheckHardLimits: open files and pids up to the hard limits pass;
// one more is refused as invalid with the bound and the rlimit named, as
// the init would fail to set it. The limits are given, not this
// process's, so the test runs whatever the host's are.
func TestCheckHardLimits(t *testing.T) {
	const files, procs = 512, 1000
	at := spec.Limits{OpenFiles: files, Pids: procs - initTasks}
	if err := checkUnder(at, uint64(at.Pids)+initTasks, files, procs); err != nil {
		t.Errorf("checkUnder() at the hard limits = %v, want nil", err)
	}
	if err := checkUnder(spec.Limits{OpenFiles: spec.MaxOpenFiles, Pids: spec.MaxPids}, spec.MaxPids, unix.RLIM_INFINITY, unix.RLIM_INFINITY); err != nil {
		t.Errorf("checkUnder() with no hard limits = %v, want nil", err)
	}
	tests := []struct {
		l     spec.Limits
		nproc uint64
		want  string
	}{
		{spec.Limits{OpenFiles: files + 1}, 0,
			"open files 513 is above 512, the hard RLIMIT_NOFILE this warden was started with, which no sandbox can raise: ask for at most 512, or start warden with a higher hard limit (ulimit -Hn"},
		{spec.Limits{Pids: procs + 1}, procs + 1, "pids 1001 is above 1000, the hard RLIMIT_NPROC"},
		{spec.Limits{Pids: procs}, procs + initTasks, fmt.Sprintf("ask for at most %d", procs-initTasks)},
	}
	for _, tt := range tests {
		err := checkUnder(tt.l, tt.nproc, files, procs)
		if err == nil || !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkUnder(%+v) = %v, want ErrInvalid containing %q", tt.l, err, tt.want)
		}
	}
}

// TestHardCeilings: the ceilings are the hard limits, less the init's
// tasks rootless, so a request at the pids ceiling passes checkUnder.
func TestHardCeilings(t *testing.T) {
	for _, rootless := range []bool{false, true} {
		got := hardCeilings(512, 1000, rootless)
		if len(got) != 2 || got[0].Name != "open files" || got[0].Value != 512 || got[1].Name != "pids" {
			t.Fatalf("hardCeilings(rootless %v) = %+v, want open files 512 and pids", rootless, got)
		}
		pids, nproc := got[1].Value, uint64(got[1].Value)
		if rootless {
			nproc += initTasks
		}
		if err := checkUnder(spec.Limits{OpenFiles: got[0].Value, Pids: pids}, nproc, 512, 1000); err != nil {
			t.Errorf("a request at the ceilings (rootless %v) = %v, want nil", rootless, err)
		}
	}
	if got := hardCeilings(unix.RLIM_INFINITY, unix.RLIM_INFINITY, true); len(got) != 0 {
		t.Errorf("hardCeilings() with no hard limits = %+v, want none", got)
	}
}
