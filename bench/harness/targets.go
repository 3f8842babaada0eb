//go:build linux

package main

import (
	"errors"
	"fmt"
	"strings"
)

// The contenders the targets name.
const (
	bareName  = "bare"
	runName   = "warden run"
	runGoName = "warden run (go init)"
	bwrapName = "bwrap --unshare-all"
)

// Target is one of issue 20's targets with what this run measured.
type Target struct {
	What  string `json:"what"`
	Bound string `json:"bound"`
	// Ratio is the subject's figure over the reference's (0: unknown).
	Ratio float64 `json:"ratio,omitempty"`
	// Figures are the medians the ratio is made of.
	Figures string `json:"figures,omitempty"`
	// GoInit is the same ratio with the Go init's `warden run` in the
	// subject's place (0: not a `warden run` target, or not measured), so
	// the fast executor's gain shows in the same run.
	GoInit float64 `json:"go_init_ratio,omitempty"`
	// Status is met, missed, reported (no bound), or why it was not
	// measured.
	Status string `json:"status"`
}

// goal says how one target is read from a run's sections: the subject
// row's figure over the reference row's, against bound.
type goal struct {
	what string
	// section and unit pick the table (the two tables of (e) share an
	// ID); x the row's concurrency (0: none).
	section, unit string
	x             int
	subject, ref  string
	// cpu compares CPU per run instead of wall time (or runs/s).
	cpu bool
	// bound is the limit on the ratio (0: reported only), a floor when
	// atLeast, else a ceiling; boundText replaces its rendering.
	bound     float64
	atLeast   bool
	boundText string
	// noErrors makes any failed run of the subject a miss.
	noErrors bool
	// elsewhere names the program that measures the target, when the
	// harness does not.
	elsewhere string
}

// goals are issue 20's targets, in its order.
var goals = []goal{
	{what: "`warden run` print(1) (a): wall time vs bubblewrap", section: "a", unit: "ms", subject: runName, ref: bwrapName, bound: 1},
	{what: "`warden run` print(1) (a): wall time vs bare", section: "a", unit: "ms", subject: runName, ref: bareName, bound: 1.30},
	{what: "pooled API print(1) (a): wall time vs bare", section: "a", unit: "ms", subject: apiName(apiPool), ref: bareName, bound: 1.10},
	{what: "128 concurrent `warden run` (e): runs/s vs bare's, 0 errors", section: "e", unit: "runs/s", x: 128,
		subject: runName, ref: bareName, bound: 1 / 1.5, atLeast: true, boundText: "≥ 0.67x (1/1.5)", noErrors: true},
	{what: "128 concurrent pooled API (e): runs/s vs bare's, 0 errors", section: "e", unit: "runs/s", x: 128,
		subject: apiName(apiPool), ref: bareName, bound: 1 / 1.5, atLeast: true, boundText: "≥ 0.67x (1/1.5)", noErrors: true},
	{what: "print(1) beside 12 hostile neighbours: p50 vs alone", bound: 3,
		elsewhere: "`make benchmark-tenants` (part neighbours) measures it"},
	{what: "CPU per run, `warden run` print(1) (a) vs bubblewrap", section: "a", unit: "ms", subject: runName, ref: bwrapName, cpu: true},
	{what: "CPU per run, `warden run` heavy (b) vs bubblewrap", section: "b", unit: "ms", subject: runName, ref: bwrapName, cpu: true},
	{what: "CPU per run, pooled API print(1) (a) vs bubblewrap", section: "a", unit: "ms", subject: apiName(apiPool), ref: bwrapName, cpu: true},
	{what: "heavy cold `warden run` (b): wall time vs bare", section: "b", unit: "ms", subject: runName, ref: bareName, bound: 1.10},
}

// checkTargets reads every goal from ss.
func checkTargets(ss []Section) []Target {
	ts := make([]Target, len(goals))
	for i, g := range goals {
		ts[i] = g.check(ss)
	}
	return ts
}

// check reads g from ss.
func (g goal) check(ss []Section) Target {
	t := Target{What: g.what, Bound: g.boundString()}
	if g.elsewhere != "" {
		t.Status = "not measured here: " + g.elsewhere
		return t
	}
	subj, err := g.row(ss, g.subject)
	var ref Row
	if err == nil {
		ref, err = g.row(ss, g.ref)
	}
	if err == nil && g.cpu && (fromRusage(subj) || fromRusage(ref)) {
		err = errors.New(rusageNote)
	}
	if err != nil {
		t.Status = "not measured: " + err.Error()
		return t
	}
	t.Ratio = g.value(subj) / g.value(ref)
	t.Figures = g.figure(subj) + " / " + g.figure(ref)
	t.Status = g.judge(t.Ratio, subj.Errors)
	if g.subject == runName {
		if r, err := g.row(ss, runGoName); err == nil && !(g.cpu && fromRusage(r)) {
			t.GoInit = g.value(r) / g.value(ref)
		}
	}
	return t
}

func (g goal) boundString() string {
	switch {
	case g.boundText != "":
		return g.boundText
	case g.bound == 0:
		return "reported (no bound)"
	case g.atLeast:
		return fmt.Sprintf("≥ %.2fx", g.bound)
	}
	return fmt.Sprintf("≤ %.2fx", g.bound)
}

// row is the row of contender name in g's table, or why there is none to
// read.
func (g goal) row(ss []Section, name string) (Row, error) {
	for _, s := range ss {
		if s.ID != g.section {
			continue
		}
		for _, r := range s.Rows {
			if r.Contender != name || r.X != g.x || r.Unit != g.unit {
				continue
			}
			switch {
			case r.Skipped != "":
				return r, fmt.Errorf("%s skipped: %s", name, r.Skipped)
			case g.value(r) <= 0:
				return r, fmt.Errorf("%s: no %s samples", name, g.kind())
			}
			return r, nil
		}
	}
	return Row{}, fmt.Errorf("no row of %s in (%s)%s", name, g.section, g.at())
}

func (g goal) at() string {
	if g.x == 0 {
		return ""
	}
	return fmt.Sprintf(" at %d", g.x)
}

func (g goal) kind() string {
	if g.cpu {
		return "CPU"
	}
	return g.unit
}

// value is the figure g compares: the CPU or the plain median.
func (g goal) value(r Row) float64 {
	if g.cpu {
		return r.CPUMedian
	}
	return r.Median
}

func (g goal) figure(r Row) string {
	unit := g.unit
	if g.cpu {
		unit = "ms CPU"
	}
	return fmt.Sprintf("%s %.1f %s", r.Contender, g.value(r), unit)
}

func (g goal) judge(ratio float64, errs int) string {
	switch {
	case g.noErrors && errs > 0:
		return fmt.Sprintf("missed (%d errors)", errs)
	case g.bound == 0:
		return "reported"
	case g.atLeast && ratio >= g.bound, !g.atLeast && ratio <= g.bound:
		return "met"
	}
	return "missed"
}

// targetsMarkdown is the summary at the top of results.md.
func targetsMarkdown(ts []Target) string {
	var b strings.Builder
	b.WriteString("\n## Issue 20's targets in this run\n\n")
	b.WriteString("Ratios of this run's medians (figures: subject / reference); \"Go init\" is the same ratio for `warden run --executor go`. " +
		"With `--quick` the rounds are few: read each ratio with its table's IQR below. " +
		"The API rows, the 128 concurrent ones included, run servers with `--max-memory-per-key 0` (and no start or exec pacing): " +
		"the harness measures what the host carries, not one tenant's share; a server with the default per-key budget refuses " +
		"most of 128 concurrent runs with 429s. Where the hard `RLIMIT_NOFILE` is too low to keep the server's whole descriptor reserve " +
		"(20000 on the development host) the server still holds a connection per sandbox (`--max-sessions 1024`); a server built " +
		"before that held 64 and answered the rest of a 128-request burst with 503s, which count as errors.\n\n")
	b.WriteString("| target | bound | measured | figures | Go init | status |\n|---|---|---:|---|---:|---|\n")
	for _, t := range ts {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", t.What, t.Bound, ratioCell(t.Ratio), t.Figures, ratioCell(t.GoInit), cell(t.Status))
	}
	return b.String()
}

// ratioCell renders a ratio, blank when unknown.
func ratioCell(r float64) string {
	if r <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", r)
}
