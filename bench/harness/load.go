package main

import (
	"slices"
	"sync"
	"time"
)

// concurrency is (e): N workers running one-shot python3 -c 'print(1)'
// until a fixed number of runs is done, bare, under warden run on each
// backend, through warden serve's API (pool of apiPool, drained by the
// burst) and under bubblewrap: throughput (runs/s) and each run's latency.
// gVisor and Docker take ten times as long per run, so they do N runs
// rather than 2N, and with --quick only quickBoxedRuns one at a time.
func concurrency(o options) []Section {
	lat := Section{ID: "e", Title: "latency of N concurrent one-shot runs", Baseline: ""}
	thr := Section{ID: "e", Title: "throughput of N concurrent one-shot runs (runs/s)"}
	api := apiContender(o.warden, apiPool)
	defer cleanupContenders([]*contender{api})
	light := []*contender{bare(), wardenRun(o.warden, "native"), api, bwrap()}
	boxed := []*contender{wardenRun(o.warden, "gvisor"), wardenRun(o.warden, "docker")}
	for _, n := range o.concurrency {
		for _, c := range append(light, boxed...) {
			isBoxed := slices.Contains(boxed, c)
			total := max(2*n, 32)
			switch {
			case o.quick && isBoxed:
				total = quickBoxedRuns
			case o.quick || isBoxed:
				total = max(n, 16)
			}
			if c.skipped != "" || (o.quick && isBoxed && n > 1) {
				continue
			}
			l, rate, errs := burst(c, n, total)
			lat.Rows = append(lat.Rows, Row{Workload: "e", Contender: c.name, Unit: "ms", X: n, Samples: l, Errors: errs})
			thr.Rows = append(thr.Rows, Row{Workload: "e", Contender: c.name, Unit: "runs/s", X: n, Samples: []float64{rate}, Errors: errs})
		}
	}
	return []Section{lat, thr}
}

// quickBoxedRuns is how many runs --quick makes on gVisor and Docker.
const quickBoxedRuns = 8

// burst runs printOne on c total times with n at once.
func burst(c *contender, n, total int) (lat []float64, rate float64, errs int) {
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
				d, err := c.time(printOne)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, float64(total-errs) / time.Since(start).Seconds(), errs
}
