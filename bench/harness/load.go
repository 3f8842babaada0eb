//go:build linux

package main

import (
	"slices"
	"sync"
	"time"
)

// concurrency is (e): N workers running one-shot python3 -c 'print(1)'
// until a fixed number of runs is done: throughput (runs/s) and each
// run's latency. The main contenders (bare, warden run with its default
// executor and with the Go init, warden serve's API with a pool of apiPool,
// which the burst drains, and bubblewrap) make max(2N, 32) runs at every
// N, max(N, 16) with --quick. The others (runc, gVisor and Docker,
// through Warden and directly) take up to ten times as long per run, so
// they make max(N, 16); with --quick only quickOtherRuns, one at a time.
func concurrency(o options) []Section {
	lat := Section{ID: "e", Title: "latency of N concurrent one-shot runs", Baseline: ""}
	thr := Section{ID: "e", Title: "throughput of N concurrent one-shot runs (runs/s)"}
	core := []*contender{bare(), wardenRun(o.warden, "native"), wardenRunGo(o.warden), apiContender(o.warden, apiPool), bwrap()}
	others := []*contender{ociContender("runc", o.warden), wardenRun(o.warden, "gvisor"), ociContender("runsc", o.warden),
		wardenRun(o.warden, "docker"), dockerRun(o.warden)}
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
			l, rate, errs, last := burst(c, n, total)
			note := ""
			if last != nil {
				note = "last error: " + last.Error()
			}
			lat.Rows = append(lat.Rows, Row{Workload: "e", Contender: c.name, Unit: "ms", X: n, Samples: l, Errors: errs, Note: note})
			thr.Rows = append(thr.Rows, Row{Workload: "e", Contender: c.name, Unit: "runs/s", X: n, Samples: []float64{rate}, Errors: errs, Note: note})
		}
	}
	return []Section{lat, thr}
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
				d, _, err := c.time(printOne)
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
