package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// Report is the whole run.
type Report struct {
	Machine string  `json:"machine"`
	Command string  `json:"command"`
	Version string  `json:"version"`
	Label   string  `json:"label,omitempty"`
	Quick   bool    `json:"quick"`
	Date    string  `json:"date"`
	Seconds float64 `json:"seconds"`
	// ServeArgs are the extra flags given to warden serve; Dropped those
	// the binary did not have.
	ServeArgs  []string    `json:"serve_args,omitempty"`
	Dropped    []string    `json:"dropped_serve_args,omitempty"`
	Fairness   []FairRow   `json:"fairness,omitempty"`
	HostCPU    []CPURow    `json:"host_cpu,omitempty"`
	Starts     []StartRow  `json:"starts,omitempty"`
	Neighbours []BenignRow `json:"neighbours,omitempty"`
}

func newReport(o options) *Report {
	v, _ := exec.Command(o.warden, "version").CombinedOutput()
	return &Report{Machine: measure.Machine(), Command: commandLine(o.args), Version: strings.TrimSpace(string(v)), Label: o.label,
		Quick: o.quick, Date: time.Now().UTC().Format(time.RFC3339), ServeArgs: o.serveArgs, Dropped: o.droppedArgs}
}

// commandLine is the command that made a report: this program run with
// args, every flag as it was given, each quoted for a POSIX shell where
// it needs it, so that a result file says how to run it again.
func commandLine(args []string) string {
	parts := []string{"go", "run", "./bench/tenants"}
	for _, a := range args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell unless it holds only characters
// no shell treats specially.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// write puts tenants[-label].json and .md in dir and returns the
// markdown's path.
func (r *Report) write(dir, label string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	name := "tenants"
	if label != "" {
		name += "-" + label
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
		return "", err
	}
	md := filepath.Join(dir, name+".md")
	return md, os.WriteFile(md, []byte(r.markdown()), 0o644)
}

// mark says whether a row met its target; a baseline row has none.
func mark(pass, baseline bool) string {
	switch {
	case baseline:
		return "(baseline)"
	case pass:
		return "yes"
	}
	return "**no**"
}

func (r *Report) markdown() string {
	var b strings.Builder
	title := "Hostile tenants"
	if r.Label != "" {
		title += " (" + r.Label + ")"
	}
	fmt.Fprintf(&b, "# %s\n\nMachine: %s. Binary: %s. Date: %s. Command: `%s` (%.0f s).\n", title, r.Machine, r.Version, r.Date, r.Command, r.Seconds)
	if r.Quick {
		b.WriteString("\nThe quick form: short windows and few samples, so the figures are rough.\n")
	}
	if len(r.ServeArgs)+len(r.Dropped) > 0 {
		fmt.Fprintf(&b, "\nwarden serve flags: %v; dropped (not in this binary): %v.\n", r.ServeArgs, r.Dropped)
	}
	r.summaryMD(&b)
	r.fairnessMD(&b)
	r.hostMD(&b)
	r.startsMD(&b)
	r.neighboursMD(&b)
	return b.String()
}

// summaryMD counts the rows that met their targets.
func (r *Report) summaryMD(b *strings.Builder) {
	count := func(n, met int, what string) {
		if n > 0 {
			fmt.Fprintf(b, "- %s: %d of %d meet the target\n", what, met, n)
		}
	}
	b.WriteString("\n## Summary\n\n")
	n, met := 0, 0
	for _, row := range r.Fairness {
		if !row.Baseline {
			n++
			met += btoi(row.Pass)
		}
	}
	count(n, met, "attacks on key A's exec latency")
	n, met = 0, 0
	incomparable := 0
	for _, row := range r.HostCPU {
		if row.NotComparable != "" {
			incomparable++
			continue
		}
		n++
		met += btoi(row.Pass)
	}
	count(n, met, "host-CPU rows")
	if incomparable > 0 {
		fmt.Fprintf(b, "- host-CPU rows not comparable (see their notes): %d\n", incomparable)
	}
	n, met = 0, 0
	for _, row := range r.Neighbours {
		if !row.Baseline {
			n++
			met += btoi(row.Pass)
		}
	}
	count(n, met, "benign runs beside the neighbours (CLI, API)")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r *Report) fairnessMD(b *strings.Builder) {
	if len(r.Fairness) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Key A's `1+1` exec under key B's attacks\n\nTarget: p50 within %dx of unloaded, 0 errors. Times in ms.\n\n", fairRatio)
	b.WriteString("| attack of key B | n | p50 | p90 | p99 | ratio | errors | target met | note |\n|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, row := range r.Fairness {
		if row.Skipped != "" {
			fmt.Fprintf(b, "| %s | | | | | | | | skipped: %s |\n", row.Attack, cell(row.Skipped))
			continue
		}
		note := row.Note
		if row.LastError != "" {
			note = strings.TrimPrefix(note+"; ", "; ") + fmt.Sprintf("failed execs took %.0f ms (median); last error: %s",
				measure.Pct(row.ErrorMS, 50), row.LastError)
		}
		if len(row.Samples) == 0 {
			fmt.Fprintf(b, "| %s | 0 | | | | | %d | %s | %s |\n", row.Attack, row.Errors, mark(row.Pass, row.Baseline), cell(note))
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %.2f | %.2f | %.2f | %.2fx | %d | %s | %s |\n", row.Attack, len(row.Samples), row.P50, row.P90, row.P99,
			row.Ratio, row.Errors, mark(row.Pass, row.Baseline), cell(note))
	}
}

func (r *Report) hostMD(b *strings.Builder) {
	if len(r.HostCPU) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Host CPU outside the sandbox per unit of its CPU quota\n\nTarget: at most %.1f. Quota = cpus × wall time; "+
		"host = CPU outside the sandbox's cgroups (CLI: `warden run --json` itself plus its init's threads outside the cgroup; "+
		"API: warden serve, its spawner and the inits' threads outside the cgroups). Seconds.\n\n", hostRatio)
	b.WriteString("Excess is host/quota less the spinner's (the control, at the same mode and cpus): the pattern's own cost without Warden's fixed start and stop.\n\n")
	b.WriteString("Host/used is per CPU second the sandbox did use, which a loaded machine may leave below its quota.\n\n")
	b.WriteString("| mode | pattern | cpus | wall | quota | sandbox used | host | host/quota | excess | host/used | target met | note |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, row := range r.HostCPU {
		if row.Failed != "" {
			fmt.Fprintf(b, "| %s | %s | %g | | | | | | | | | failed: %s |\n", row.Mode, row.Pattern, row.CPUs, cell(row.Failed))
			continue
		}
		note, met := row.Note, mark(row.Pass, false)
		if row.Mode == "CLI" {
			note = fmt.Sprintf("warden run %.3f s; ", row.SelfS) + note
		}
		if row.NotComparable != "" {
			note, met = "not comparable: "+row.NotComparable+"; "+note, "not comparable"
		}
		excess := ""
		if row.Excess != nil {
			excess = fmt.Sprintf("%.3f", *row.Excess)
		}
		used, perUsed := "-", "-" // a stalled stream brings no Result
		if row.Mode != stalledMode {
			used, perUsed = fmt.Sprintf("%.3f", row.SandboxS), fmt.Sprintf("%.3f", row.HostS/max(row.SandboxS, 1e-3))
		}
		fmt.Fprintf(b, "| %s | %s | %g | %.2f | %.3f | %s | %.3f | %.3f | %s | %s | %s | %s |\n", row.Mode, row.Pattern, row.CPUs, row.WallS,
			row.QuotaS, used, row.HostS, row.Ratio, excess, perUsed, met, cell(note))
	}
}

func (r *Report) neighboursMD(b *strings.Builder) {
	if len(r.Neighbours) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## A benign one-shot beside 12 hostile neighbours\n\n`python3 -c 'print(1)'` with default limits, alone and beside "+
		"3 fork bombs, 3 memory bombs, 3 output floods and 3 spinners (%.1f CPU, %d MiB, %d pids each). Target: p50 at most %dx alone. Times in ms.\n\n",
		neighbourCPUs, neighbourMemory>>20, neighbourPids, benignRatio)
	b.WriteString("| mode | phase | n | p50 | p90 | ratio | errors | target met | note |\n|---|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, row := range r.Neighbours {
		fmt.Fprintf(b, "| %s | %s | %d | %.2f | %.2f | %.2fx | %d | %s | %s |\n", row.Mode, row.Phase, len(row.Samples), row.P50, row.P90,
			row.Ratio, row.Errors, mark(row.Pass, row.Baseline), cell(row.Note))
	}
}

// cell makes s safe in a markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
