//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// Row is one contender on one workload.
type Row struct {
	Workload  string    `json:"workload"`
	Contender string    `json:"contender"`
	Unit      string    `json:"unit"`
	Samples   []float64 `json:"samples,omitempty"`
	Median    float64   `json:"median"`
	P99       float64   `json:"p99"`
	// IQR is the spread of the middle half, the noise of the figure.
	IQR float64 `json:"iqr"`
	// Ratio is the median over the workload's baseline's (0 when none).
	Ratio float64 `json:"ratio,omitempty"`
	// VsCompare is the median over the section's Compare row's.
	VsCompare float64 `json:"vs_compare,omitempty"`
	// CPU holds each run's CPU time in ms (user and system of its whole
	// process tree), where measured, and CPUMedian, CPUIQR, CPURatio and
	// CPUVsCompare are its median, spread and ratios as for the wall time.
	CPU          []float64 `json:"cpu_samples,omitempty"`
	CPUMedian    float64   `json:"cpu_median,omitempty"`
	CPUIQR       float64   `json:"cpu_iqr,omitempty"`
	CPURatio     float64   `json:"cpu_ratio,omitempty"`
	CPUVsCompare float64   `json:"cpu_vs_compare,omitempty"`
	// X is the row's parameter (concurrency, session count), if any.
	X       int    `json:"x,omitempty"`
	Errors  int    `json:"errors,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Section is one workload's rows; Baseline names the row every ratio is
// to, and Compare, when set, a second reference (bubblewrap's row).
type Section struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Baseline string `json:"baseline,omitempty"`
	Compare  string `json:"compare,omitempty"`
	Rows     []Row  `json:"rows"`
}

// Report is the whole run.
type Report struct {
	Machine string  `json:"machine"`
	Command string  `json:"command"`
	Quick   bool    `json:"quick"`
	Date    string  `json:"date"`
	Seconds float64 `json:"seconds"`
	// Targets are issue 20's targets checked against Sections.
	Targets  []Target  `json:"targets"`
	Sections []Section `json:"sections"`
	// started is when the run began, for the progress lines.
	started time.Time
}

func newReport(o options) *Report {
	cmd := strings.Join(append([]string{"go run ./bench/harness"}, os.Args[1:]...), " ")
	now := time.Now()
	return &Report{Machine: machine(), Command: cmd, Quick: o.quick, Date: now.UTC().Format(time.RFC3339), started: now}
}

func (r *Report) add(ss ...Section) {
	for _, s := range ss {
		s.figure()
		r.Sections = append(r.Sections, s)
		fmt.Fprintf(os.Stderr, "done (%s) %s, %.0f s in\n", s.ID, s.Title, time.Since(r.started).Seconds())
	}
}

// figure computes each row's medians, spreads and ratios from its samples.
func (s *Section) figure() {
	for i := range s.Rows {
		row := &s.Rows[i]
		row.Median, row.P99, row.IQR = pct(row.Samples, 50), pct(row.Samples, 99), iqr(row.Samples)
		row.CPUMedian, row.CPUIQR = pct(row.CPU, 50), iqr(row.CPU)
	}
	wall := func(r Row) float64 { return r.Median }
	cpu := func(r Row) float64 { return r.CPUMedian }
	for i := range s.Rows {
		row := &s.Rows[i]
		if row.Skipped != "" {
			continue
		}
		row.Ratio, row.CPURatio = s.ratio(*row, s.Baseline, wall), s.ratio(*row, s.Baseline, cpu)
		row.VsCompare, row.CPUVsCompare = s.ratio(*row, s.Compare, wall), s.ratio(*row, s.Compare, cpu)
		if fromRusage(*row) || s.compareFromRusage() {
			row.CPUVsCompare = 0
		}
	}
}

// rusageNote opens the note of a row whose CPU is wait4's rusage, which
// misses what outlives the command: bubblewrap's PID 1 among others, so
// no CPU ratio against bubblewrap is read from such a row.
const rusageNote = "CPU from rusage"

// fromRusage says whether r's CPU is wait4's rusage (rusageNote).
func fromRusage(r Row) bool { return strings.HasPrefix(r.Note, rusageNote) }

// compareFromRusage says whether s's Compare row has its CPU from rusage.
func (s *Section) compareFromRusage() bool {
	for _, r := range s.Rows {
		if r.Contender == s.Compare && fromRusage(r) {
			return true
		}
	}
	return false
}

// ratio is get(row) over get of the row named ref, 0 when either is
// unknown (no such row, skipped, or no samples).
func (s *Section) ratio(row Row, ref string, get func(Row) float64) float64 {
	if ref == "" {
		return 0
	}
	for _, r := range s.Rows {
		if r.Contender == ref && r.Skipped == "" && get(r) > 0 {
			return get(row) / get(r)
		}
	}
	return 0
}

func iqr(xs []float64) float64 { return pct(xs, 75) - pct(xs, 25) }

func machine() string { return measure.Machine() }

func pct(xs []float64, p int) float64 { return measure.Pct(xs, p) }

// timeArgv runs argv to its end and returns its wall time in ms and its
// CPU time in ms: user and system time of the process and of every
// descendant it waited for (wait4's rusage), so of the whole tree where
// each process reaps its children.
func timeArgv(argv []string) (wall, cpu float64, err error) {
	start := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, tail(out))
	}
	wall = ms(time.Since(start))
	return wall, ms(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()), nil
}

// settleLimit bounds the wait for what a run left in its cgroup to end.
const settleLimit = 5 * time.Second

// timeInGroup runs argv to its end with its process tree born in g and
// returns its wall time in ms and the CPU in ms charged to g from its start
// until the run and everything it left behind ended: the whole tree's,
// orphans included (bwrap's PID 1 outlives bwrap, so wait4's rusage misses
// it and the program it reaped). CPU is -1 when something it left was
// still running settleLimit after it.
func timeInGroup(argv []string, g *measure.AcctGroup) (wall, cpu float64, err error) {
	before, err := g.Total()
	if err != nil {
		return 0, 0, err
	}
	if wall, err = startInGroup(argv, g); err != nil {
		return 0, 0, err
	}
	if err := g.Settle(settleLimit); err != nil {
		log.Printf("no CPU figure for a run of %s: %v", argv[0], err)
		return wall, -1, nil
	}
	after, err := g.Total()
	if err != nil {
		return 0, 0, err
	}
	return wall, 1000 * (after - before), nil
}

// startInGroup runs argv to its end with its process tree born in g and
// returns its wall time in ms.
func startInGroup(argv []string, g *measure.AcctGroup) (float64, error) {
	var out bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := g.Start(cmd); err != nil {
		return 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	err := cmd.Wait()
	wall := ms(time.Since(start))
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, tail(out.Bytes()))
	}
	return wall, nil
}

func ms(d time.Duration) float64 { return measure.MS(d) }

func tail(b []byte) string { return measure.Tail(b) }

// write puts results.json, results.md and the charts in dir. The charts
// need Debian's python3 with matplotlib (make deps), not whatever
// python3 comes first on PATH.
func (r *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	script := filepath.Join(filepath.Dir(os.Args[0]), "charts.py")
	if _, err := os.Stat(script); err != nil {
		script = "bench/harness/charts.py"
	}
	if out, err := exec.Command("/usr/bin/python3", script, filepath.Join(dir, "results.json"), dir).CombinedOutput(); err != nil {
		return fmt.Errorf("drawing the charts: %w: %s", err, tail(out))
	}
	return nil
}

func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark results\n\nMachine: %s. Date: %s. Command: `%s` (%.0f s).\n", r.Machine, r.Date, r.Command, r.Seconds)
	fmt.Fprintf(&b, "Medians and p99; IQR is the spread of the middle half of the samples (the noise); ratios are of medians.\n")
	b.WriteString(targetsMarkdown(r.Targets))
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n## (%s) %s\n\n", s.ID, s.Title)
		if s.Compare != "" {
			b.WriteString(s.cpuTable())
			continue
		}
		b.WriteString("| contender | n | median | p99 | IQR | ratio | errors | note |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, row := range s.Rows {
			name := row.Contender
			if row.X > 0 {
				name = fmt.Sprintf("%s (%d)", name, row.X)
			}
			if row.Skipped != "" {
				fmt.Fprintf(&b, "| %s | | | | | | | skipped: %s |\n", name, cell(row.Skipped))
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %.2f %s | %.2f | %.2f | %s | %d | %s |\n", name, len(row.Samples), row.Median, row.Unit, row.P99, row.IQR, ratioCell(row.Ratio), row.Errors, cell(row.Note))
		}
	}
	return b.String()
}

// cpuTable is a cold workload's table: wall time and CPU per run, each
// with its ratio to the baseline and to the Compare row.
func (s Section) cpuTable() string {
	var b strings.Builder
	b.WriteString("CPU is user + system time per run of the whole process tree (see bench/README.md).\n\n")
	fmt.Fprintf(&b, "| contender | n | median | p99 | IQR | vs %[1]s | vs %[2]s | CPU | CPU IQR | CPU vs %[1]s | CPU vs %[2]s | errors | note |\n", s.Baseline, s.Compare)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range s.Rows {
		if row.Skipped != "" {
			fmt.Fprintf(&b, "| %s | | | | | | | | | | | | skipped: %s |\n", row.Contender, cell(row.Skipped))
			continue
		}
		cpu, cpuIQR := "", ""
		if len(row.CPU) > 0 {
			cpu, cpuIQR = fmt.Sprintf("%.2f ms", row.CPUMedian), fmt.Sprintf("%.2f", row.CPUIQR)
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f %s | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %d | %s |\n", row.Contender, len(row.Samples),
			row.Median, row.Unit, row.P99, row.IQR, ratioCell(row.Ratio), ratioCell(row.VsCompare),
			cpu, cpuIQR, ratioCell(row.CPURatio), ratioCell(row.CPUVsCompare), row.Errors, cell(row.Note))
	}
	return b.String()
}

// cell makes s fit one markdown table cell: one line, no bare column bar.
func cell(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ", "|", "\\|").Replace(s)
}
