package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// BenignRow is N benign one-shot runs, alone or beside the neighbours.
type BenignRow struct {
	Mode    string    `json:"mode"`
	Phase   string    `json:"phase"`
	Samples []float64 `json:"samples_ms,omitempty"`
	P50     float64   `json:"p50_ms"`
	P90     float64   `json:"p90_ms"`
	Errors  int       `json:"errors"`
	// Ratio is P50 over the first alone P50.
	Ratio float64 `json:"ratio,omitempty"`
	// Pass: beside the neighbours, within benignRatio of alone.
	Pass bool `json:"pass"`
	// Baseline marks a row alone, which has no target.
	Baseline bool   `json:"baseline,omitempty"`
	Note     string `json:"note,omitempty"`
}

// benignRatio is the target: beside the neighbours, at most this many
// times slower than alone.
const benignRatio = 3

// benign is the program whose latency is measured.
var benign = []string{python, "-c", "print(1)"}

// Each neighbour gets these limits: twelve of them at 0.1 CPU each cap
// 1.2 cores in all.
const (
	neighbourCPUs   = 0.1
	neighbourMemory = 128 << 20
	neighbourPids   = 64
)

// neighbourKinds are the hostile neighbours, three of each.
var neighbourKinds = []struct {
	name string
	prog func(s float64) []string
}{
	{"fork bomb", forkBomb},
	{"memory bomb", func(s float64) []string { return memBomb(s, neighbourMemory) }},
	{"output flood", yesFlood},
	{"spinner", spinner},
}

// neighbourTally counts what the neighbours did.
type neighbourTally struct {
	runs, refused atomic.Int64
	mu            sync.Mutex
	refusal       string
}

// neighbours measures benign runs alone and beside the twelve
// neighbours, on the CLI and through the API.
func neighbours(o options, t *tenants) []BenignRow {
	var rows []BenignRow
	cli := func() (float64, error) {
		start := time.Now()
		out, err := exec.Command(o.warden, append([]string{"run", "--"}, benign...)...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			return 0, fmt.Errorf("warden run: %w: %s", err, measure.Tail(out))
		}
		return measure.MS(time.Since(start)), nil
	}
	api := func() (float64, error) { return t.a.OneShot(benign) }
	for _, m := range []struct {
		mode  string
		run   func() (float64, error)
		start func(ctx context.Context, tally *neighbourTally) func()
	}{
		{"CLI (warden run)", cli, func(ctx context.Context, tl *neighbourTally) func() { return cliNeighbours(ctx, o, tl) }},
		{"API (POST /v1/run)", api, func(ctx context.Context, tl *neighbourTally) func() { return apiNeighbours(ctx, o, t, tl) }},
	} {
		log.Printf("neighbours: %s", m.mode)
		rows = append(rows, benignRuns(m.mode, m.run, o.benignRuns, m.start)...)
	}
	return rows
}

// benignRuns times n runs alone, n beside the neighbours, and n alone
// again (the drift of the machine).
func benignRuns(mode string, run func() (float64, error), n int, start func(context.Context, *neighbourTally) func()) []BenignRow {
	times := func(phase string) BenignRow {
		row := BenignRow{Mode: mode, Phase: phase}
		for i := 0; i < n; i++ {
			d, err := run()
			if err != nil {
				row.Errors++
				row.Note = err.Error()
				continue
			}
			row.Samples = append(row.Samples, d)
		}
		row.P50, row.P90 = measure.Pct(row.Samples, 50), measure.Pct(row.Samples, 90)
		return row
	}
	for i := 0; i < 2; i++ {
		_, _ = run() // warm-up rounds, not measured
	}
	alone := times("alone")
	ctx, cancel := context.WithCancel(context.Background())
	var tally neighbourTally
	wait := start(ctx, &tally)
	time.Sleep(neighbourRamp)
	beside := times("beside 12 neighbours")
	cancel()
	wait()
	beside.Note = strings.TrimPrefix(beside.Note+"; ", "; ") + fmt.Sprintf("%d neighbour runs", tally.runs.Load())
	if r := tally.refused.Load(); r > 0 {
		beside.Note += fmt.Sprintf(", %d refused to start (%s)", r, tally.refusal)
	}
	time.Sleep(settle)
	after := times("alone, after")
	alone.Baseline, after.Baseline = true, true
	rows := []BenignRow{alone, beside, after}
	for i := range rows {
		if alone.P50 > 0 && len(rows[i].Samples) > 0 {
			rows[i].Ratio = rows[i].P50 / alone.P50
			rows[i].Pass = !rows[i].Baseline && rows[i].Ratio <= benignRatio && rows[i].Errors == 0
		}
	}
	return rows
}

// neighbourRamp is how long the neighbours run before the benign runs.
const neighbourRamp = 2 * time.Second

// neighbourSlots runs each of the twelve neighbours again and again
// until ctx ends, one(ctx, prog) being one run; a neighbour that refused
// to start is not run again.
func neighbourSlots(ctx context.Context, tally *neighbourTally, one func(ctx context.Context, prog []string) (refusal string)) (wait func()) {
	var wg sync.WaitGroup
	for _, k := range neighbourKinds {
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					tally.runs.Add(1)
					if why := one(ctx, k.prog(neighbourSecs)); why != "" {
						tally.refused.Add(1)
						tally.mu.Lock()
						tally.refusal = k.name + ": " + why
						tally.mu.Unlock()
						return
					}
				}
			}()
		}
	}
	return wg.Wait
}

// neighbourSecs is how long one neighbour run lasts; its slot starts
// another after it.
const neighbourSecs = 20

// refusalOf is the refusal line a hostile program printed, if any.
func refusalOf(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "refusing to start") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// cliNeighbours runs the neighbours with warden run; at the end each is
// sent SIGTERM (warden run then removes its sandbox) and, if it has not
// exited within stopGrace, SIGKILL.
func cliNeighbours(ctx context.Context, o options, tally *neighbourTally) func() {
	return neighbourSlots(ctx, tally, func(ctx context.Context, prog []string) string {
		args := []string{"run", "--cpus", fmt.Sprint(neighbourCPUs), "--memory", fmt.Sprint(neighbourMemory),
			"--pids", fmt.Sprint(neighbourPids), "--timeout", fmt.Sprintf("%ds", neighbourSecs+5), "--"}
		cmd := exec.Command(o.warden, append(args, prog...)...)
		var stderr capped
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return "starting warden run: " + err.Error()
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }() // only the end matters: the run's output is the result
		select {
		case <-done:
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM) // fails only once it has ended, which done tells
			select {
			case <-done:
			case <-time.After(stopGrace):
				log.Printf("warden run (pid %d) ignored SIGTERM for %s: killing it", cmd.Process.Pid, stopGrace)
				_ = cmd.Process.Kill() // fails only once it has ended, which done tells
				<-done
			}
		}
		return refusalOf(stderr.String())
	})
}

// stopGrace bounds how long a neighbour may take to stop.
const stopGrace = 10 * time.Second

// apiNeighbours runs the neighbours as one-shot runs of key B; ending
// ctx cancels the requests, which ends the runs.
func apiNeighbours(ctx context.Context, o options, t *tenants, tally *neighbourTally) func() {
	return neighbourSlots(ctx, tally, func(ctx context.Context, prog []string) string {
		var r struct {
			Stderr string `json:"stderr"`
		}
		body := map[string]any{"command": prog, "limits": map[string]any{"cpus": neighbourCPUs, "memory_bytes": neighbourMemory,
			"pids": neighbourPids, "timeout_seconds": neighbourSecs + 5}}
		if err := t.b.Do(ctx, http.MethodPost, "/v1/run", body, &r); err != nil && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		return refusalOf(r.Stderr)
	})
}

// capped keeps the first 64 KiB written to it.
type capped struct {
	mu sync.Mutex
	b  []byte
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := 64<<10 - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}
