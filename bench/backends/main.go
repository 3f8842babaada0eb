// Command backends measures each backend's cold one-shot start and warm
// session exec, next to the raw tool the backend drives, all in one run
// with the rounds interleaved:
//
//   - native: bare /bin/true vs `warden run -- /bin/true`;
//   - gvisor: `runsc run` of Warden's own bundle with /bin/true as PID 1
//     (the same root, mounts and limits, no agent) vs
//     `warden run --backend gvisor -- /bin/true`;
//   - docker: `docker run --rm` of Warden's root image with /bin/true vs
//     `warden run --backend docker -- /bin/true`;
//   - per backend, an exec of /bin/true and of Python's `1+1` in a warm
//     session through `warden serve`.
//
// Run as root from the repository, after make build (and make deps for
// runsc and dockerd): go run ./bench/backends -warden bin/warden
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	warden := flag.String("warden", "bin/warden", "the warden binary")
	rounds := flag.Int("rounds", 20, "interleaved rounds of each cold start")
	execs := flag.Int("execs", 100, "execs measured in each warm session")
	only := flag.String("backends", "native,gvisor,docker", "backends to measure")
	flag.Parse()
	if err := run(*warden, *rounds, *execs, strings.Split(*only, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "backends:", err)
		os.Exit(1)
	}
}

// contender is one command timed cold.
type contender struct {
	name string
	argv []string
	ms   []float64
}

func run(warden string, rounds, execs int, backends []string) error {
	var cs []*contender
	var cleanups []func()
	defer func() {
		for _, c := range cleanups {
			c()
		}
	}()
	for _, b := range backends {
		raw, cleanup, err := rawTool(b, warden)
		if err != nil {
			fmt.Printf("skipping %s: %v\n", b, err)
			continue
		}
		cleanups = append(cleanups, cleanup)
		cs = append(cs, raw, &contender{name: "warden run --backend " + b + " -- /bin/true", argv: []string{warden, "run", "--backend", b, "--", "/bin/true"}})
	}
	for i := -2; i < rounds; i++ {
		for _, c := range cs {
			d, err := timeCmd(c.argv)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if i >= 0 {
				c.ms = append(c.ms, d)
			}
		}
	}
	fmt.Printf("\nCold one-shot /bin/true, %d interleaved rounds after 2 warm-ups (ms)\n\n", rounds)
	fmt.Println("| contender | median | p90 | ratio to the raw tool |")
	fmt.Println("|---|---:|---:|---:|")
	for i := 0; i < len(cs); i += 2 {
		raw, w := cs[i], cs[i+1]
		fmt.Printf("| %s | %.1f | %.1f | 1.00x |\n", raw.name, median(raw.ms), pct(raw.ms, 90))
		fmt.Printf("| %s | %.1f | %.1f | %.2fx |\n", w.name, median(w.ms), pct(w.ms, 90), median(w.ms)/median(raw.ms))
	}
	fmt.Printf("\nWarm session exec through warden serve, %d execs (ms)\n\n", execs)
	fmt.Println("| backend | /bin/true median | p90 | python 1+1 median | p90 |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, b := range backends {
		tr, py, err := sessionExecs(warden, b, execs)
		if err != nil {
			fmt.Printf("| %s | skipped: %v | | | |\n", b, err)
			continue
		}
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", b, median(tr), pct(tr, 90), median(py), pct(py, 90))
	}
	return nil
}

// idMark in an argv is replaced by a fresh container id each time.
const idMark = "{id}"

var ids int

func timeCmd(argv []string) (float64, error) {
	argv = slices.Clone(argv)
	for i, a := range argv {
		if a == idMark {
			ids++
			argv[i] = fmt.Sprintf("bench-%d-%d", os.Getpid(), ids)
		}
	}
	start := time.Now()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

func median(xs []float64) float64 { return pct(xs, 50) }

func pct(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}
