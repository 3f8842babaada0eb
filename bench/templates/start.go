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
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	return exec.CommandContext(ctx, warden, args...).CombinedOutput()
}

// contender is one root a start is timed on.
type contender struct {
	template string // "" is host
	samples  []float64
	errs     int
	skipped  string
	note     string // said after the root's name
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
	fmt.Fprintf(b, "## Start: `warden run -- python3 -c 'print(1)'`\n\n%d rounds after 2 warm-ups, interleaved; target: a template's median within 1.10x of host's.\n\n", o.rounds)
	fmt.Fprintln(b, "| backend | root | median ms | p90 ms | ratio to host (median) | errors |\n|---|---|---|---|---|---|")
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
		host := measure.Pct(cs[0].samples, 50)
		for _, c := range cs {
			fmt.Fprintln(b, c.row(be, host))
		}
	}
	fmt.Fprintln(b)
	return nil
}

// time runs c once on backend be; a failed warm-up skips c with the
// reason, a failed timed run counts as an error.
func (c *contender) time(warden, be, state string, warm bool) {
	start := time.Now()
	out, err := output(warden, c.argv(be, state)...)
	d := time.Since(start)
	switch {
	case err != nil && warm:
		c.skipped = fmt.Sprintf("%v: %s", err, measure.Tail(out))
	case err != nil || strings.TrimSpace(string(out)) != "1":
		c.errs++
	case !warm:
		c.samples = append(c.samples, measure.MS(d))
	}
}

// row is c's table row; host is host's median on the same backend.
func (c *contender) row(be string, host float64) string {
	name := c.template
	if name == "" {
		name = "host"
	}
	name += c.note
	if c.skipped != "" {
		return fmt.Sprintf("| %s | %s | skipped: %s | | | |", be, name, strings.ReplaceAll(c.skipped, "\n", " "))
	}
	med := measure.Pct(c.samples, 50)
	ratio := "-"
	if host > 0 {
		ratio = fmt.Sprintf("%.2fx", med/host)
	}
	return fmt.Sprintf("| %s | %s | %.1f | %.1f | %s | %d |", be, name, med, measure.Pct(c.samples, 90), ratio, c.errs)
}
