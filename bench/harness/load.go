package main

import (
	"sync"
	"time"
)

// concurrency is (e): N workers running one-shot python3 -c 'print(1)'
// until a fixed number of runs is done, bare, under warden run, and
// through warden serve's API (pool of apiPool, drained by the burst):
// throughput (runs/s) and each run's latency.
func concurrency(o options) []Section {
	lat := Section{ID: "e", Title: "latency of N concurrent one-shot runs", Baseline: ""}
	thr := Section{ID: "e", Title: "throughput of N concurrent one-shot runs (runs/s)"}
	api := apiContender(o.warden, apiPool)
	defer cleanupContenders([]*contender{api})
	for _, n := range o.concurrency {
		total := max(2*n, 32)
		if o.quick {
			total = max(n, 16)
		}
		for _, c := range []*contender{
			{name: "bare", argv: func([]string) []string { return printOne }},
			{name: "warden native", argv: func([]string) []string { return append([]string{o.warden, "run", "--"}, printOne...) }},
			api,
		} {
			if c.skipped != "" {
				continue
			}
			l, rate, errs := burst(c, n, total)
			lat.Rows = append(lat.Rows, Row{Workload: "e", Contender: c.name, Unit: "ms", X: n, Samples: l, Errors: errs})
			thr.Rows = append(thr.Rows, Row{Workload: "e", Contender: c.name, Unit: "runs/s", X: n, Samples: []float64{rate}, Errors: errs})
		}
	}
	return []Section{lat, thr}
}

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
