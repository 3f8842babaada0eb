//go:build !slim

package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// paces are the flags that pace what costs the host CPU no cgroup
// charges: execs per session and starts per key.
type paces struct {
	exec, start float64
}

// addPaceFlags adds --exec-pace, the fraction of a sandbox's CPU quota
// the host may spend starting its execs (see sandbox.Config.ExecPace),
// and --start-rate, the sessions and runs one key may start a second
// (sandbox.Config.StartRate).
func addPaceFlags(f *pflag.FlagSet, p *paces) {
	f.Float64Var(&p.exec, "exec-pace", sandbox.DefaultExecPace,
		"fraction of a session's CPU quota (cpus) the host may spend starting its execs, which no cgroup charges: "+
			"past a burst of 200 code or 80 command execs per session, execs wait their turn (0: no pacing)")
	f.Float64Var(&p.start, "start-rate", sandbox.DefaultStartRate,
		fmt.Sprintf("sessions and one-shot runs one key may start a second (%.4g, one a minute, up to %d), each costing the host CPU no cgroup charges: "+
			"past a burst of %d (or %d s of the rate), a start is answered 429 with Retry-After (0: no pacing)",
			float64(sandbox.MinStartRate), sandbox.MaxStartRate, sandbox.MinStartBurst, sandbox.StartBurstSeconds))
}

// apply sets c's ExecPace and StartRate from the flags: 0 turns pacing
// off, which the Config says with a negative value.
func (p paces) apply(c *sandbox.Config) error {
	var err error
	if c.ExecPace, err = offAtZero("--exec-pace", p.exec, sandbox.MaxExecPace); err != nil {
		return err
	}
	c.StartRate, err = offAtZero("--start-rate", p.start, sandbox.MaxStartRate)
	return err
}

// offAtZero is a pacing flag as the Config takes it: -1 (off) for 0, a
// negative value refused.
func offAtZero(name string, flag, most float64) (float64, error) {
	switch {
	case flag < 0:
		return 0, fmt.Errorf("%s %g is negative: use 0 (no pacing) up to %g", name, flag, most)
	case flag == 0:
		return -1, nil
	}
	return flag, nil
}
