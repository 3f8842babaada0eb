//go:build linux

package main

import (
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// concurrency is (e): N workers running one-shot python3 -c 'print(1)'
// until a fixed number of runs is done: throughput (runs/s) and each
// run's latency. The main contenders (bare, warden run with its default
// executor and with the Go init, warden serve's API with a pool of apiPool,
// which the burst drains, and bubblewrap) make max(2N, 32) runs at every
// N, max(N, 16) with --quick. The others (runc, gVisor and Docker,
// through Warden and directly) take up to ten times as long per run, so
// they make max(N, 16); with --quick only quickOtherRuns, one at a time
// (so they are not even set up when no N is 1). A third table gives each
// burst's CPU per run (burstCPU).
func concurrency(o options) []Section {
	lat := Section{ID: "e", Title: "latency of N concurrent one-shot runs", Baseline: ""}
	thr := Section{ID: "e", Title: "throughput of N concurrent one-shot runs (runs/s)"}
	cpu := Section{ID: "e", Title: "CPU per run of N concurrent one-shot runs (the whole burst's CPU over its runs)"}
	core := []*contender{bare(), wardenRun(o.warden, "native"), wardenRunGo(o.warden), apiContender(o.warden, apiPool), bwrap()}
	var others []*contender
	if !o.quick || slices.Contains(o.concurrency, 1) {
		others = []*contender{ociContender("runc", o.warden), wardenRun(o.warden, "gvisor"), ociContender("runsc", o.warden),
			wardenRun(o.warden, "docker"), dockerRun(o.warden)}
	}
	all := append(core, others...)
	exitOnFatal(all)
	defer cleanupContenders(all)
	for _, n := range o.concurrency {
		for _, c := range all {
			other := slices.Contains(others, c)
			total := max(2*n, 32)
			switch {
			case o.quick && other:
				total = quickOtherRuns
			case o.quick || other:
				total = max(n, 16)
			}
			if c.skipped != "" || (o.quick && other && n > 1) {
				continue
			}
			meter := newBurstCPU(c, n)
			l, rate, errs, last := burst(c, n, total)
			note := ""
			if last != nil {
				note = "last error: " + last.Error()
			}
			lat.Rows = append(lat.Rows, Row{Workload: "e", Contender: c.name, Unit: "ms", X: n, Samples: l, Errors: errs, Note: note})
			thr.Rows = append(thr.Rows, Row{Workload: "e", Contender: c.name, Unit: "runs/s", X: n, Samples: []float64{rate}, Errors: errs, Note: note})
			cpu.Rows = append(cpu.Rows, meter.row(c.name, n, total-errs))
		}
	}
	return []Section{lat, thr, cpu}
}

// burstCPU measures the CPU a whole burst cost: for a contender with a
// command line, what a cpuacct cgroup its runs are born in used (c.acct
// for the burst, each run's tree included); for the API, what its
// server's cgroup used from the burst's start to its end (the pool's
// refill after it is left out). Concurrent runs share the group, so only
// the burst's total over its runs is a figure, not each run's.
type burstCPU struct {
	c      *contender
	g      *measure.AcctGroup
	read   func() (float64, error)
	before float64
	why    string // why there is no figure, if there is none
	// note qualifies the figure: for the API, what the server's group
	// spent outside the burst and is left out.
	note string
}

// newBurstCPU starts measuring c's next burst of n runs.
func newBurstCPU(c *contender, n int) *burstCPU {
	b := &burstCPU{c: c}
	switch {
	case c.cpuNote != "":
		b.why = c.cpuNote
	case c.usage != nil:
		b.read = c.usage
		b.note = "the server's CPU during the burst only: the pooled sandboxes it used were built before it, and the pool's refill after it is not counted, so this is low by up to the pool's build"
	case c.argv != nil:
		g, err := measure.NewAcctGroup(fmt.Sprintf("warden-harness-%d-burst%d-%d", os.Getpid(), n, time.Now().UnixNano()))
		if err != nil {
			b.why = "no cpuacct cgroup: " + err.Error()
			break
		}
		b.g, c.acct = g, g
		b.read = func() (float64, error) { s, err := g.Total(); return 1000 * s, err }
	default:
		b.why = "no way to read it"
	}
	if b.read != nil {
		var err error
		if b.before, err = b.read(); err != nil {
			b.why, b.read = err.Error(), nil
		}
	}
	return b
}

// row ends the measure and gives it as a row of CPU ms per run.
func (b *burstCPU) row(name string, n, runs int) Row {
	r := Row{Workload: "e", Contender: name, Unit: "CPU ms/run", X: n}
	if b.g != nil {
		defer func() { b.c.acct = nil; b.g.Remove() }()
		if err := b.g.Settle(settleLimit); err != nil {
			log.Printf("CPU of a burst of %s read with processes left: %v", name, err)
		}
	}
	switch {
	case b.read == nil:
		r.Note = "not measured: " + b.why
	case runs == 0:
		r.Note = "no run succeeded"
	default:
		after, err := b.read()
		if err != nil {
			r.Note = "not measured: " + err.Error()
			break
		}
		r.Samples = []float64{(after - b.before) / float64(runs)}
		r.Note = b.note
	}
	return r
}

// quickOtherRuns is how many runs --quick makes on the other contenders.
const quickOtherRuns = 8

// burst runs printOne on c total times with n at once, and returns the
// last error of the runs that failed, if any.
func burst(c *contender, n, total int) (lat []float64, rate float64, errs int, last error) {
	jobs := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				d, err := c.timeOnly(printOne)
				mu.Lock()
				if err != nil {
					errs++
					last = err
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, float64(total-errs) / time.Since(start).Seconds(), errs, last
}
