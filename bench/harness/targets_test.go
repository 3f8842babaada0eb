//go:build linux

package main

import (
	"errors"
	"strings"
	"testing"
)

// cold is a cold-start section with rows of the given wall and CPU medians.
func cold(id string, rows ...Row) Section {
	for i := range rows {
		rows[i].Unit = "ms"
	}
	s := Section{ID: id, Baseline: bareName, Compare: bwrapName, Rows: rows}
	s.figure()
	return s
}

// ran is a row of one sample each of wall and CPU time.
func ran(name string, wall, cpu float64) Row {
	return Row{Contender: name, Samples: []float64{wall}, CPU: []float64{cpu}}
}

// rate is a throughput row of (e) at 128.
func rate(name string, runsPerS float64, errs int) Row {
	return Row{Contender: name, Unit: "runs/s", X: 128, Samples: []float64{runsPerS}, Errors: errs}
}

func TestGoalCheck(t *testing.T) {
	a := cold("a", ran(bareName, 20, 30), ran(runName, 25, 60), ran(runGoName, 32, 90), ran(bwrapName, 24, 40),
		Row{Contender: apiName(apiPool), Skipped: "port in use"})
	b := cold("b", ran(bareName, 500, 600), ran(runName, 540, 700), Row{Contender: runGoName, Skipped: "this warden refuses --executor go"}, ran(bwrapName, 600, 650))
	e := Section{ID: "e", Rows: []Row{rate(bareName, 150, 0), rate(runName, 110, 0), rate(runGoName, 90, 0), rate(apiName(apiPool), 120, 2)}}
	e.figure()
	ss := []Section{a, b, e}
	tests := []struct {
		name                         string
		g                            goal
		wantRatio, wantGo            float64
		wantStatus, wantFigures, why string
	}{
		{name: "met below a ceiling", g: goal{section: "a", unit: "ms", subject: runName, ref: bareName, bound: 1.30},
			wantRatio: 1.25, wantGo: 1.6, wantStatus: "met", wantFigures: "warden run 25.0 ms / bare 20.0 ms"},
		{name: "missed above a ceiling", g: goal{section: "a", unit: "ms", subject: runName, ref: bwrapName, bound: 1},
			wantRatio: 25.0 / 24, wantGo: 32.0 / 24, wantStatus: "missed"},
		{name: "CPU is reported with no bound", g: goal{section: "a", unit: "ms", subject: runName, ref: bwrapName, cpu: true},
			wantRatio: 1.5, wantGo: 90.0 / 40, wantStatus: "reported", wantFigures: "warden run 60.0 ms CPU / bwrap --unshare-all 40.0 ms CPU"},
		{name: "a skipped Go init leaves its column empty", g: goal{section: "b", unit: "ms", subject: runName, ref: bareName, bound: 1.10},
			wantRatio: 1.08, wantStatus: "met"},
		{name: "a skipped subject is not measured", g: goal{section: "a", unit: "ms", subject: apiName(apiPool), ref: bareName, bound: 1.10},
			wantStatus: "not measured: warden native API (pool 8) skipped: port in use"},
		{name: "a floor met", g: goal{section: "e", unit: "runs/s", x: 128, subject: runName, ref: bareName, bound: 1 / 1.5, atLeast: true, noErrors: true},
			wantRatio: 110.0 / 150, wantGo: 0.6, wantStatus: "met"},
		{name: "errors miss a floor that is met", g: goal{section: "e", unit: "runs/s", x: 128, subject: apiName(apiPool), ref: bareName, bound: 1 / 1.5, atLeast: true, noErrors: true},
			wantRatio: 0.8, wantStatus: "missed (2 errors)"},
		{name: "a floor missed", g: goal{section: "e", unit: "runs/s", x: 128, subject: runGoName, ref: bareName, bound: 1 / 1.5, atLeast: true},
			wantRatio: 0.6, wantStatus: "missed"},
		{name: "no row at that concurrency", g: goal{section: "e", unit: "runs/s", x: 32, subject: runName, ref: bareName, bound: 1},
			wantStatus: "not measured: no row of warden run in (e) at 32"},
		{name: "measured elsewhere", g: goal{bound: 3, elsewhere: "make benchmark-tenants"},
			wantStatus: "not measured here: make benchmark-tenants"},
	}
	for _, tt := range tests {
		got := tt.g.check(ss)
		if !near(got.Ratio, tt.wantRatio) || !near(got.GoInit, tt.wantGo) || got.Status != tt.wantStatus {
			t.Errorf("%s: got ratio %.3f, Go init %.3f, status %q; want %.3f, %.3f, %q", tt.name, got.Ratio, got.GoInit, got.Status, tt.wantRatio, tt.wantGo, tt.wantStatus)
		}
		if tt.wantFigures != "" && got.Figures != tt.wantFigures {
			t.Errorf("%s: got figures %q, want %q", tt.name, got.Figures, tt.wantFigures)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestGoalsAreIssue20s: every target of the issue has a goal, in the
// issue's order, read from the issue's table and rows with the issue's
// bound: a goal whose section, unit, concurrency, subject, reference,
// bound or kind drifts fails here.
func TestGoalsAreIssue20s(t *testing.T) {
	type pin struct {
		section, unit          string
		x                      int
		subject, ref           string
		bound                  float64
		atLeast, noErrors, cpu bool
		boundText              string
	}
	floor := pin{section: "e", unit: "runs/s", x: 128, bound: 1 / 1.5, atLeast: true, noErrors: true, boundText: "≥ 0.67x (1/1.5)"}
	at := func(p pin, subject string) pin { p.subject, p.ref = subject, bareName; return p }
	want := []pin{
		{section: "a", unit: "ms", subject: runName, ref: bwrapName, bound: 1, boundText: "≤ 1.00x"},
		{section: "a", unit: "ms", subject: runName, ref: bareName, bound: 1.30, boundText: "≤ 1.30x"},
		{section: "a", unit: "ms", subject: apiName(apiPool), ref: bareName, bound: 1.10, boundText: "≤ 1.10x"},
		at(floor, runName),
		at(floor, apiName(apiPool)),
		{bound: 3, boundText: "≤ 3.00x"}, // measured by bench/tenants
		{section: "a", unit: "ms", subject: runName, ref: bwrapName, cpu: true, boundText: "reported (no bound)"},
		{section: "b", unit: "ms", subject: runName, ref: bwrapName, cpu: true, boundText: "reported (no bound)"},
		{section: "a", unit: "ms", subject: apiName(apiPool), ref: bwrapName, cpu: true, boundText: "reported (no bound)"},
		{section: "b", unit: "ms", subject: runName, ref: bareName, bound: 1.10, boundText: "≤ 1.10x"},
	}
	if len(goals) != len(want) {
		t.Fatalf("got %d goals, want issue 20's %d", len(goals), len(want))
	}
	for i, g := range goals {
		got := pin{g.section, g.unit, g.x, g.subject, g.ref, g.bound, g.atLeast, g.noErrors, g.cpu, g.boundString()}
		if got != want[i] {
			t.Errorf("goal %d %q:\ngot  %+v\nwant %+v", i, g.what, got, want[i])
		}
	}
	if goals[5].elsewhere == "" {
		t.Errorf("goal %q: got no program that measures it, want bench/tenants's", goals[5].what)
	}
}

// TestRusageCPU: a row whose CPU is wait4's rusage misses what outlives
// its command (bubblewrap's PID 1), so no CPU ratio against bubblewrap is
// read when the subject's or bubblewrap's row has it.
func TestRusageCPU(t *testing.T) {
	noted := func(r Row) Row { r.Note = rusageNote + ", no cpuacct cgroup: none"; return r }
	g := goal{section: "a", unit: "ms", subject: runName, ref: bwrapName, cpu: true}
	tests := []struct {
		name       string
		s          Section
		wantStatus string
		wantVs     float64
	}{
		{"both from cgroups", cold("a", ran(runName, 25, 60), ran(bwrapName, 24, 40)), "reported", 1.5},
		{"bubblewrap from rusage", cold("a", ran(runName, 25, 60), noted(ran(bwrapName, 24, 40))), "not measured: " + rusageNote, 0},
		{"warden run from rusage", cold("a", noted(ran(runName, 25, 60)), ran(bwrapName, 24, 40)), "not measured: " + rusageNote, 0},
	}
	for _, tt := range tests {
		if got := g.check([]Section{tt.s}); got.Status != tt.wantStatus || got.Ratio != 0 && tt.wantVs == 0 {
			t.Errorf("%s: got status %q, ratio %.3f; want %q", tt.name, got.Status, got.Ratio, tt.wantStatus)
		}
		if got := tt.s.Rows[0].CPUVsCompare; !near(got, tt.wantVs) {
			t.Errorf("%s: got CPU vs bwrap %.3f, want %.3f", tt.name, got, tt.wantVs)
		}
	}
}

// TestFigure: each row's ratios to the baseline and to the Compare row,
// for wall time and CPU, and none where a figure is unknown.
func TestFigure(t *testing.T) {
	s := cold("a", ran(bareName, 20, 40), ran(runName, 30, 50), ran(bwrapName, 24, 25),
		Row{Contender: "docker run", Samples: []float64{100}}, Row{Contender: runGoName, Skipped: "no warden-exec"})
	tests := []struct {
		row                        int
		ratio, vs, cpuRatio, cpuVs float64
	}{
		{0, 1, 20.0 / 24, 1, 40.0 / 25},
		{1, 1.5, 1.25, 1.25, 2},
		{2, 1.2, 1, 25.0 / 40, 1},
		{3, 5, 100.0 / 24, 0, 0},
		{4, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		r := s.Rows[tt.row]
		if !near(r.Ratio, tt.ratio) || !near(r.VsCompare, tt.vs) || !near(r.CPURatio, tt.cpuRatio) || !near(r.CPUVsCompare, tt.cpuVs) {
			t.Errorf("%s: got ratio %.3f, vs %.3f, CPU ratio %.3f, CPU vs %.3f; want %.3f, %.3f, %.3f, %.3f", r.Contender,
				r.Ratio, r.VsCompare, r.CPURatio, r.CPUVsCompare, tt.ratio, tt.vs, tt.cpuRatio, tt.cpuVs)
		}
	}
}

// TestGroupMeter: a run is charged its tree's usage from its start to
// the next run's start (or the end), and a failed run nothing.
func TestGroupMeter(t *testing.T) {
	used := 0.0
	m := groupMeter{usage: func() (float64, error) { return used, nil }}
	var row Row
	m.start(&row) // run 1
	used += 30
	m.start(&row) // run 2, which fails
	used += 45
	m.drop()
	m.start(&row) // run 3
	used += 10
	m.end(&row)
	m.end(&row) // nothing open: nothing added
	want := []float64{30, 10}
	if len(row.CPU) != len(want) || row.CPU[0] != want[0] || row.CPU[1] != want[1] {
		t.Errorf("got CPU samples %v, want %v", row.CPU, want)
	}
	failing := groupMeter{usage: func() (float64, error) {
		if used > 100 {
			return 0, errors.New("cpuacct.usage: gone")
		}
		return used, nil
	}}
	var lost Row
	failing.start(&lost)
	used += 200
	failing.end(&lost)
	if len(lost.CPU) != 0 || lost.Note != "CPU not measured: cpuacct.usage: gone" {
		t.Errorf("a failed read at a run's end: got CPU %v, note %q; want none and the error", lost.CPU, lost.Note)
	}
	var none groupMeter
	none.start(&row)
	none.end(&row)
	if len(row.CPU) != 2 {
		t.Errorf("a meter without usage added samples: %v", row.CPU)
	}
}

// TestTables: the cold tables carry CPU beside wall time, with both
// references named, and results.md opens with the targets.
func TestTables(t *testing.T) {
	a := cold("a", ran(bareName, 20, 40), ran(runName, 30, 50), ran(bwrapName, 24, 25), Row{Contender: runGoName, Skipped: "no warden-exec"},
		Row{Contender: apiName(apiPool), Skipped: "exit 1: warden: a|b\nsecond line"})
	r := &Report{Sections: []Section{a}, Targets: checkTargets([]Section{a})}
	md := r.markdown()
	for _, want := range []string{
		"| contender | n | median | p99 | IQR | vs bare | vs bwrap --unshare-all | CPU | CPU IQR | CPU vs bare | CPU vs bwrap --unshare-all | errors | note |",
		"| warden run | 1 | 30.00 ms | 30.00 | 0.00 | 1.50x | 1.25x | 50.00 ms | 0.00 | 1.25x | 2.00x | 0 |  |",
		"| warden run (go init) | | | | | | | | | | | | skipped: no warden-exec |",
		"| `warden run` print(1) (a): wall time vs bare | ≤ 1.30x | 1.50x | warden run 30.0 ms / bare 20.0 ms |  | missed |",
		"| warden native API (pool 8) | | | | | | | | | | | | skipped: exit 1: warden: a\\|b second line |",
		"run servers with `--max-memory-per-key 0`",
		"refuses most of 128 concurrent runs with 429s",
		"the server still holds a connection per sandbox",
		"| pooled API print(1) (a): wall time vs bare | ≤ 1.10x |  |  |  | not measured: warden native API (pool 8) skipped: exit 1: warden: a\\|b second line |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "targets in this run") > strings.Index(md, "## (a)") {
		t.Errorf("the targets are not at the top:\n%s", md)
	}
}
