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
	"strconv"
	"strings"
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
	// workloads are the letters of the workloads to measure (all by
	// default), so one table can be measured again without the rest.
	workloads string
}

// allWorkloads are the harness's workloads by letter.
const allWorkloads = "abcdefgh"

func main() {
	o := options{}
	flag.StringVar(&o.warden, "warden", "bin/warden", "the warden binary")
	flag.StringVar(&o.out, "out", defaultOut, "where results.md, results.json and the charts go")
	flag.BoolVar(&o.quick, "quick", false, "fewer rounds (not measured on an idle machine; 18 minutes at a load of 22-155)")
	flag.StringVar(&o.workloads, "workloads", allWorkloads, "the workloads to measure, by letter (e: only the concurrent runs)")
	conc := flag.String("concurrency", "", "the N of (e), comma-separated (default 1,8,32,128)")
	flag.Parse()
	o.scale()
	if err := o.choose(*conc); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(2)
	}
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

// choose checks --workloads and applies --concurrency (when not empty).
func (o *options) choose(conc string) error {
	if o.workloads == "" || strings.Trim(o.workloads, allWorkloads) != "" {
		return fmt.Errorf("--workloads %q: give letters among %s, e.g. --workloads e", o.workloads, allWorkloads)
	}
	if !o.whole() && o.out == defaultOut {
		return fmt.Errorf("--workloads %q measures part of the set: give --out DIR too, so that the whole run's results in %s are not replaced by a part", o.workloads, defaultOut)
	}
	if conc == "" {
		return nil
	}
	o.concurrency = nil
	for _, f := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxConcurrency {
			return fmt.Errorf("--concurrency %q: give numbers from 1 to %d separated by commas, e.g. --concurrency 8,128", conc, maxConcurrency)
		}
		o.concurrency = append(o.concurrency, n)
	}
	return nil
}

// defaultOut is where a whole run's results go; a partial run
// (--workloads) must name its own --out.
const defaultOut = "bench/results"

// maxConcurrency bounds --concurrency: each worker of (e) holds a process
// tree or a connection.
const maxConcurrency = 1024

// whole says whether every workload is to be measured.
func (o options) whole() bool {
	for _, id := range allWorkloads {
		if !o.has(string(id)) {
			return false
		}
	}
	return true
}

// has says whether workload id is to be measured.
func (o options) has(id string) bool { return strings.Contains(o.workloads, id) }

// run measures every selected workload in turn.
func run(o options) (*Report, error) {
	r := newReport(o)
	if o.has("a") || o.has("b") {
		cs := coldContenders(o.warden)
		if o.has("a") {
			r.add(coldStart(cs, "a", "cold one-shot python3 -c 'print(1)'", printOne, o.rounds))
		}
		if o.has("b") {
			r.add(coldStart(cs, "b", "cold one-shot numpy + a small matplotlib PNG", plotPNG, o.heavyRounds))
		}
		cleanupContenders(cs)
	}
	if o.has("c") || o.has("d") || o.has("f") { // measured together, kept as selected
		for _, b := range sandbox.BackendNames() {
			for _, s := range sessionWorkloads(o, b) {
				if o.has(s.ID) {
					r.add(s)
				}
			}
		}
	}
	if o.has("e") {
		r.add(concurrency(o)...)
	}
	if o.has("g") {
		r.add(idleMemory(o))
	}
	if o.has("h") {
		r.add(egressThroughput(o))
	}
	r.Targets = checkTargets(r.Sections)
	return r, nil
}
