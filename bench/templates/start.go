package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// runTimeout bounds each command the benchmark runs.
const runTimeout = 5 * time.Minute

// output runs warden with args, killed after runTimeout, and returns its
// combined output.
func output(warden string, args ...string) ([]byte, error) {
	out, _, err := cpuOutput(warden, args...)
	return out, err
}

// cpuOutput is output that also returns the CPU time (user and system)
// of warden and every process it waited for: the init and the sandbox's
// program, whose own reaped children count in theirs. It measures the
// work a start does rather than how long other load made it wait.
func cpuOutput(warden string, args ...string) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, warden, args...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		return out, 0, err
	}
	return out, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), err
}

// contender is one root a start is timed on.
type contender struct {
	template string // "" is host
	samples  []float64
	// cpu are the timed runs' CPU times (cpuOutput), in ms.
	cpu     []float64
	errs    int
	skipped string
	note    string // said after the root's name
}

// argv is the `warden run` of contender c on backend b.
func (c *contender) argv(b, state string) []string {
	a := []string{"run", "--backend", b, "--state-dir", state}
	if c.template != "" {
		a = append(a, "--template", c.template)
	}
	return append(a, "--", "python3", "-c", "print(1)")
}

// startPart times `warden run -- python3 -c 'print(1)'` on host and on
// each template, per backend: two warm-ups each, then o.rounds rounds
// interleaved across the contenders, so drifting load hits all alike.
func startPart(b *strings.Builder, o options, state string) error {
	fmt.Fprintf(b, "## Start: `warden run -- python3 -c 'print(1)'`\n\n%d rounds after 2 warm-ups, interleaved; target: a template's median within 1.10x of host's. CPU is the user and system time of `warden run` and every process it waited for (on native the init and the program, on gVisor runsc and what it waited for; Docker's engine and containers are not its children, so its CPU is the client's alone): the work a start does, which other load changes less than the wall time.\n\n", o.rounds)
	fmt.Fprintln(b, "| backend | root | median ms | p90 ms | ratio to host (median) | CPU median ms | CPU p90 ms | CPU ratio to host | errors |\n|---|---|---|---|---|---|---|---|---|")
	for _, be := range o.backends {
		cs := []*contender{{}}
		for _, t := range o.templates {
			c := &contender{template: t}
			switch used, err := c.rootUsed(o.warden, be, state); {
			case err != nil:
				c.skipped = err.Error()
			case used == "host":
				c.skipped = "ran on the host's root: this backend ignores --template"
			case used == "unverified":
				c.note = " (root not verified)"
			}
			cs = append(cs, c)
		}
		for round := -2; round < o.rounds; round++ {
			for _, c := range cs {
				if c.skipped == "" {
					c.time(o.warden, be, state, round < 0)
				}
			}
		}
		for _, c := range cs {
			fmt.Fprintln(b, c.row(be, cs[0]))
		}
	}
	fmt.Fprintln(b)
	return nil
}

// time runs c once on backend be; a failed warm-up skips c with the
// reason, a failed timed run counts as an error.
func (c *contender) time(warden, be, state string, warm bool) {
	start := time.Now()
	out, cpu, err := cpuOutput(warden, c.argv(be, state)...)
	d := time.Since(start)
	switch {
	case err != nil && warm:
		c.skipped = fmt.Sprintf("%v: %s", err, measure.Tail(out))
	case err != nil || strings.TrimSpace(string(out)) != "1":
		c.errs++
	case !warm:
		c.samples = append(c.samples, measure.MS(d))
		c.cpu = append(c.cpu, measure.MS(cpu))
	}
}

// row is c's table row; host is the host's contender on the same
// backend, whose medians the ratios divide by.
func (c *contender) row(be string, host *contender) string {
	name := c.template
	if name == "" {
		name = "host"
	}
	name += c.note
	if c.skipped != "" {
		return fmt.Sprintf("| %s | %s | skipped: %s | | | | | | |", be, name, strings.ReplaceAll(c.skipped, "\n", " "))
	}
	med, cpu := measure.Pct(c.samples, 50), measure.Pct(c.cpu, 50)
	return fmt.Sprintf("| %s | %s | %.1f | %.1f | %s | %.1f | %.1f | %s | %d |", be, name, med, measure.Pct(c.samples, 90),
		ratio(med, measure.Pct(host.samples, 50)), cpu, measure.Pct(c.cpu, 90), ratio(cpu, measure.Pct(host.cpu, 50)), c.errs)
}

// ratio is v/base as "1.02x", or "-" without a base.
func ratio(v, base float64) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v/base)
}
