package main

import (
	"os/exec"
	"sync"
	"time"
)

// concurrency is (e): N workers running one-shot python3 -c 'print(1)'
// until a fixed number of runs is done, bare and under warden native:
// throughput (runs/s) and each run's latency.
func concurrency(o options) []Section {
	lat := Section{ID: "e", Title: "latency of N concurrent one-shot runs", Baseline: ""}
	thr := Section{ID: "e", Title: "throughput of N concurrent one-shot runs (runs/s)"}
	for _, n := range o.concurrency {
		total := max(2*n, 32)
		if o.quick {
			total = max(n, 16)
		}
		for _, c := range []struct {
			name string
			argv []string
		}{
			{"bare", printOne},
			{"warden native", append([]string{o.warden, "run", "--"}, printOne...)},
		} {
			l, rate, errs := burst(c.argv, n, total)
			lat.Rows = append(lat.Rows, Row{Workload: "e", Contender: c.name, Unit: "ms", X: n, Samples: l, Errors: errs})
			thr.Rows = append(thr.Rows, Row{Workload: "e", Contender: c.name, Unit: "runs/s", X: n, Samples: []float64{rate}, Errors: errs})
		}
	}
	return []Section{lat, thr}
}

// burst runs argv total times with n at once.
func burst(argv []string, n, total int) (lat []float64, rate float64, errs int) {
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
				t := time.Now()
				err := exec.Command(argv[0], argv[1:]...).Run()
				mu.Lock()
				if err != nil {
					errs++
				} else {
					lat = append(lat, ms(time.Since(t)))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, float64(total-errs) / time.Since(start).Seconds(), errs
}
