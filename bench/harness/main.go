//go:build linux

// Command harness measures Warden side by side with the tools users would
// pick instead, every figure in one run on one machine, and writes
// bench/results/: results.md (tables), results.json (every sample) and
// PNG charts (drawn by charts.py with matplotlib).
//
// Workloads: (a) a cold one-shot python3 -c 'print(1)'; (b) a cold
// one-shot numpy import and a small matplotlib PNG; (c) an exec of 1+1 in
// a warm Python session through the API; (d) a 10-step notebook; (e) N
// concurrent one-shot runs against the same work without isolation; (f)
// session create, cold and from the warm pool; (g) host memory per idle
// session; (h) proxy throughput against a direct download.
//
// Contenders: the bare process, Warden native (warden run with its
// default executor and with the Go init, and the one-shot API of warden
// serve with and without a pool), gvisor and docker, bubblewrap
// --unshare-all, runc run, runsc run and docker run, each skipped with its
// reason where it cannot run. Rounds are interleaved after warm-ups, and
// each table reports the noise (p99 and the spread of the middle half);
// the cold workloads report CPU per run beside wall time. results.md opens
// with issue 20's targets checked against this run's figures.
//
//	go run ./bench/harness            (as root, after make deps build)
//	go run ./bench/harness --quick    (fewer rounds; not measured idle: 18 minutes at load 22-155)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// options are the harness's settings.
type options struct {
	warden string
	out    string
	quick  bool
	// rounds of each cold start, execs of each warm one, and so on,
	// smaller with --quick.
	rounds, heavyRounds, execs, notebooks, creates int
	concurrency                                    []int
	sessionCounts                                  []int
	egressRounds                                   int
}

func main() {
	o := options{}
	flag.StringVar(&o.warden, "warden", "bin/warden", "the warden binary")
	flag.StringVar(&o.out, "out", "bench/results", "where results.md, results.json and the charts go")
	flag.BoolVar(&o.quick, "quick", false, "fewer rounds (not measured on an idle machine; 18 minutes at a load of 22-155)")
	flag.Parse()
	o.scale()
	start := time.Now()
	r, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	r.Seconds = time.Since(start).Seconds()
	if err := r.write(o.out); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s in %.0f s\n", filepath.Join(o.out, "results.md"), r.Seconds)
}

func (o *options) scale() {
	o.rounds, o.heavyRounds, o.execs, o.notebooks, o.creates = 20, 8, 200, 5, 20
	o.concurrency, o.sessionCounts, o.egressRounds = []int{1, 8, 32, 128}, []int{10, 100, 500}, 5
	if o.quick {
		o.rounds, o.heavyRounds, o.execs, o.notebooks, o.creates = 5, 2, 40, 2, 5
		o.sessionCounts, o.egressRounds = []int{10, 100}, 2
	}
}

// run measures every workload in turn.
func run(o options) (*Report, error) {
	r := newReport(o)
	cs := coldContenders(o.warden)
	r.add(coldStart(cs, "a", "cold one-shot python3 -c 'print(1)'", printOne, o.rounds))
	r.add(coldStart(cs, "b", "cold one-shot numpy + a small matplotlib PNG", plotPNG, o.heavyRounds))
	cleanupContenders(cs)
	for _, b := range sandbox.BackendNames() {
		r.add(sessionWorkloads(o, b)...)
	}
	r.add(concurrency(o)...)
	r.add(idleMemory(o))
	r.add(egressThroughput(o))
	r.Targets = checkTargets(r.Sections)
	return r, nil
}
