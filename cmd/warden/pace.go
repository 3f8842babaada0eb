package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// addExecPaceFlag adds --exec-pace, the fraction of a sandbox's CPU quota
// the host may spend starting its execs (see sandbox.Config.ExecPace).
func addExecPaceFlag(f *pflag.FlagSet, pace *float64) {
	f.Float64Var(pace, "exec-pace", sandbox.DefaultExecPace,
		"fraction of a session's CPU quota (cpus) the host may spend starting its execs, which no cgroup charges: "+
			"past a burst of 200 code or 80 command execs per session, execs wait their turn (0: no pacing)")
}

// execPace is --exec-pace as sandbox.Config.ExecPace takes it: 0 turns
// pacing off, which the Config says with a negative value.
func execPace(flag float64) (float64, error) {
	switch {
	case flag < 0:
		return 0, fmt.Errorf("--exec-pace %g is negative: use 0 (no pacing) up to %g", flag, float64(sandbox.MaxExecPace))
	case flag == 0:
		return -1, nil
	}
	return flag, nil
}
