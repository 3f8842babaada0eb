// Command tenants measures how well Warden keeps hostile tenants from
// each other and from the host, in one run against one `warden serve`
// with two API keys (A, the victim; B, the attacker) and `warden run`:
//
//   - fairness: key A's exec of `1+1` in its session, unloaded and under
//     each attack of key B (slow bodies, a session flood, huge limits, a
//     stalled stream, output floods, refused egress, tiny execs, and an
//     unauthenticated slow-loris); target: p50 within 3x of unloaded,
//     no errors;
//   - host CPU: CPU the host spends outside a sandbox's cgroups per unit
//     of the sandbox's CPU quota, for each hostile pattern at 0.1 and 1
//     CPU, on the CLI and through the API; target: at most 0.1;
//   - starts: host CPU per one-shot run of `true` and per session
//     create and delete, a client of key B starting them back to back;
//   - neighbours: a benign one-shot `python3 -c 'print(1)'` alone and
//     beside twelve hostile neighbours (fork bombs, memory bombs, output
//     floods, spinners at 0.1 CPU each); target: at most 3x slower.
//
// Every hostile program runs inside a Warden sandbox with limits and
// stops by itself (see programs.go); network traffic stays on loopback.
// Results go to bench/results/tenants[-LABEL].md and .json.
//
//	go run ./bench/tenants --warden bin/warden [--quick] [--label before]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// options are the benchmark's settings.
type options struct {
	warden, out, label, serveLog string
	quick                        bool
	// parts, attacks and patterns select what runs (comma-separated).
	parts, attacks, patterns string
	serveArgs, droppedArgs   []string

	// window is how long A measures per attack; probeMax bounds its
	// execs there.
	window   time.Duration
	probeMax int
	// slowBodies and loris are connection counts; floodCap bounds B's
	// sessions; hugeSessions and streams are sessions of attacks 3 and 4.
	slowBodies, loris, floodCap, hugeSessions, streams int
	// rampMax bounds how long the session flood may take to fill.
	rampMax time.Duration
	// cpuSecs is each host-CPU run's length; cpuRepeats runs per row.
	cpuSecs    float64
	cpuRepeats int
	// startSecs is each start loop's length, startRefill the pause
	// before a paced one that gives the key back its whole burst, and
	// startRepeats the runs of each loop.
	startSecs    float64
	startRefill  time.Duration
	startRepeats int
	// cpuSecsFlag, when positive, replaces cpuSecs.
	cpuSecsFlag float64
	// benignRuns is N of the neighbours table.
	benignRuns int
	// args are the command line's arguments, for the report.
	args []string
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	o := options{}
	var extra listFlag
	flag.StringVar(&o.warden, "warden", "bin/warden", "the warden binary (warden-init beside it)")
	flag.StringVar(&o.out, "out", "bench/results", "where tenants[-LABEL].md and .json go")
	flag.StringVar(&o.label, "label", "", "a name for this run (before, after, a branch), added to the file names")
	flag.BoolVar(&o.quick, "quick", false, "the short form: under three minutes, and three more for the starts part")
	flag.StringVar(&o.parts, "parts", "fairness,host,starts,neighbours", "the parts to run, comma-separated")
	flag.StringVar(&o.attacks, "attacks", "", "the fairness attacks to run by number, comma-separated (1 is 1a and 1b; default all)")
	flag.StringVar(&o.patterns, "patterns", "", "the host-CPU rows to run: words their pattern must contain, comma-separated (e.g. \"egress,client loop\"; default all)")
	flag.StringVar(&o.serveLog, "serve-log", "", "write warden serve's log to this file")
	flag.Float64Var(&o.startSecs, "start-secs", 0, "each start loop's length in seconds (0: 40, or 25 with --quick); longer shows the rate past the burst of 100")
	flag.Float64Var(&o.cpuSecsFlag, "cpu-secs", 0, "length of each host-CPU run in seconds (default 10, or 2 with --quick): longer runs blur /proc's 10 ms ticks less")
	flag.Var(&extra, "serve-flag", "a flag for warden serve as --name=value, repeatable; dropped (and reported) when the binary lacks it")
	flag.Parse()
	o.args = os.Args[1:]
	log.SetPrefix("tenants: ")
	log.SetFlags(log.Ltime)
	if err := checkCPUSecs(isSet("cpu-secs"), o.cpuSecsFlag); err != nil {
		log.Fatal(err)
	}
	o.scale()
	start := time.Now()
	r, err := run(&o, extra)
	if err != nil {
		log.Fatal(err)
	}
	r.Seconds = time.Since(start).Seconds()
	md, err := r.write(o.out, o.label)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %s in %.0f s\n", md, r.Seconds)
}

// isSet says whether the flag name was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkCPUSecs refuses a --cpu-secs given that is not a positive, finite
// number of seconds; left out, the default applies.
func checkCPUSecs(set bool, secs float64) error {
	if set && !(secs > 0 && secs <= maxCPUSecs) {
		return fmt.Errorf("--cpu-secs %g is out of range: give each host-CPU run's length in seconds, above 0 and at most %d, or leave it out (10, or 2 with --quick)", secs, maxCPUSecs)
	}
	return nil
}

// maxCPUSecs bounds --cpu-secs: an hour per run.
const maxCPUSecs = 3600

func (o *options) scale() {
	o.window, o.probeMax, o.slowBodies, o.loris, o.floodCap, o.hugeSessions, o.streams = 10*time.Second, 2000, 32, 2000, 1024, 8, 4
	o.rampMax, o.cpuSecs, o.cpuRepeats, o.benignRuns = 60*time.Second, 10, 2, 40
	secs := o.startSecs
	o.startSecs, o.startRefill, o.startRepeats = 40, 20*time.Second, 3
	if o.quick {
		o.startSecs = 25
		o.window, o.probeMax, o.slowBodies, o.floodCap, o.hugeSessions, o.streams = 2500*time.Millisecond, 500, 8, 256, 4, 2
		o.rampMax, o.cpuSecs, o.cpuRepeats, o.benignRuns = 20*time.Second, 2, 1, 10
	}
	if secs > 0 {
		o.startSecs = secs
	}
	if o.cpuSecsFlag > 0 {
		o.cpuSecs = o.cpuSecsFlag
	}
}

// wantsPart says whether part runs.
func (o *options) wantsPart(part string) bool {
	for _, p := range strings.Split(o.parts, ",") {
		if strings.TrimSpace(p) == part {
			return true
		}
	}
	return false
}

// wantsAttack says whether the attack named name (its number first) runs.
func (o *options) wantsAttack(name string) bool {
	if o.attacks == "" {
		return true
	}
	for _, a := range strings.Split(o.attacks, ",") {
		if a = strings.TrimSpace(a); a != "" && strings.HasPrefix(name, a) {
			return true
		}
	}
	return false
}

// wantsPattern says whether the host-CPU rows of the pattern named name
// run: some word of o.patterns is part of it (any case).
func (o *options) wantsPattern(name string) bool {
	if o.patterns == "" {
		return true
	}
	for _, w := range strings.Split(o.patterns, ",") {
		if w = strings.TrimSpace(w); w != "" && strings.Contains(strings.ToLower(name), strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// run measures every part against one server.
func run(o *options, extra []string) (*Report, error) {
	if err := checkBinary(o.warden); err != nil {
		return nil, err
	}
	var err error
	o.serveArgs, o.droppedArgs, err = filterServeArgs(o.warden, extra)
	if err != nil {
		return nil, err
	}
	for _, a := range o.droppedArgs {
		log.Printf("warden serve has no flag %s: dropped", a)
	}
	slog, err := serveLog(o.serveLog)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := slog.Close(); err != nil {
			log.Printf("closing the server log: %v", err)
		}
	}()
	t, err := startTenants(*o, slog)
	if err != nil {
		return nil, fmt.Errorf("starting warden serve: %w", err)
	}
	defer t.srv.Stop()
	r := newReport(*o)
	if o.wantsPart("fairness") {
		if r.Fairness, err = fairness(*o, t); err != nil {
			return nil, err
		}
	}
	if o.wantsPart("host") {
		r.HostCPU = hostCost(*o, t)
	}
	if o.wantsPart("starts") {
		if r.Starts, err = startCosts(*o, slog); err != nil {
			return nil, err
		}
	}
	if o.wantsPart("neighbours") {
		r.Neighbours = neighbours(*o, t)
	}
	return r, nil
}

// checkBinary fails early, with the fix, when the binary is missing.
func checkBinary(warden string) error {
	if _, err := os.Stat(warden); err != nil {
		return fmt.Errorf("no warden binary at %s (run make build, or pass --warden): %w", warden, err)
	}
	init := filepath.Join(filepath.Dir(warden), "warden-init")
	if _, err := os.Stat(init); err != nil {
		log.Printf("no %s beside the binary: warden runs itself as the init", init)
	}
	return nil
}

// lorisCount is how many slow-loris connections to hold: want, less what
// the client's or the server's open-files limit leaves (a margin of 256
// each), and why.
func lorisCount(want, serverPid int) (int, string) {
	ours, err1 := openFiles(0)
	theirs, err2 := openFiles(serverPid)
	if err1 != nil || err2 != nil {
		return min(want, 768), fmt.Sprintf("open-files limits unknown (%v, %v): at most 768", err1, err2)
	}
	n := min(uint64(want), ours-min(ours, 256), theirs-min(theirs, 256))
	return int(n), fmt.Sprintf("asked %d; open-files limits: ours %d, the server's %d", want, ours, theirs)
}
