//go:build linux

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
	// X is the row's parameter (concurrency, session count), if any.
	X       int    `json:"x,omitempty"`
	Errors  int    `json:"errors,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Section is one workload's rows; the first row is the baseline when
// Baseline is set.
type Section struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Baseline string `json:"baseline,omitempty"`
	Rows     []Row  `json:"rows"`
}

// Report is the whole run.
type Report struct {
	Machine  string    `json:"machine"`
	Command  string    `json:"command"`
	Quick    bool      `json:"quick"`
	Date     string    `json:"date"`
	Seconds  float64   `json:"seconds"`
	Sections []Section `json:"sections"`
}

func newReport(o options) *Report {
	cmd := "go run ./bench/harness"
	if o.quick {
		cmd += " --quick"
	}
	return &Report{Machine: machine(), Command: cmd, Quick: o.quick, Date: time.Now().UTC().Format(time.RFC3339)}
}

func (r *Report) add(ss ...Section) {
	for _, s := range ss {
		for i := range s.Rows {
			row := &s.Rows[i]
			if len(row.Samples) > 0 {
				row.Median, row.P99, row.IQR = pct(row.Samples, 50), pct(row.Samples, 99), pct(row.Samples, 75)-pct(row.Samples, 25)
			}
		}
		if s.Baseline != "" {
			base := 0.0
			for _, row := range s.Rows {
				if row.Contender == s.Baseline && row.Skipped == "" {
					base = row.Median
				}
			}
			for i := range s.Rows {
				if base > 0 && s.Rows[i].Skipped == "" {
					s.Rows[i].Ratio = s.Rows[i].Median / base
				}
			}
		}
		r.Sections = append(r.Sections, s)
		fmt.Fprintf(os.Stderr, "done (%s) %s\n", s.ID, s.Title)
	}
}

func machine() string { return measure.Machine() }

func pct(xs []float64, p int) float64 { return measure.Pct(xs, p) }

// timeArgv runs argv to its end and returns its wall time in ms.
func timeArgv(argv []string) (float64, error) {
	start := time.Now()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, tail(out))
	}
	return ms(time.Since(start)), nil
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
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n## (%s) %s\n\n", s.ID, s.Title)
		b.WriteString("| contender | n | median | p99 | IQR | ratio | errors | note |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, row := range s.Rows {
			name := row.Contender
			if row.X > 0 {
				name = fmt.Sprintf("%s (%d)", name, row.X)
			}
			if row.Skipped != "" {
				fmt.Fprintf(&b, "| %s | | | | | | | skipped: %s |\n", name, row.Skipped)
				continue
			}
			ratio := ""
			if row.Ratio > 0 {
				ratio = fmt.Sprintf("%.2fx", row.Ratio)
			}
			fmt.Fprintf(&b, "| %s | %d | %.2f %s | %.2f | %.2f | %s | %d | %s |\n", name, len(row.Samples), row.Median, row.Unit, row.P99, row.IQR, ratio, row.Errors, row.Note)
		}
	}
	return b.String()
}
