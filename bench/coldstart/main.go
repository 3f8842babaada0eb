// Command coldstart measures what isolation costs a one-shot program: it
// runs `python3 -c 'print(1)'` bare, under warden, and under bubblewrap with
// every namespace, interleaved round by round so drifting machine load hits
// all contenders alike, and prints medians, p90 and ratios to the bare
// process measured in the same run.
//
//	go run ./bench/coldstart -warden bin/warden -n 60
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

type contender struct {
	name string
	argv []string
	// skip is why the contender cannot run here, or "".
	skip    string
	samples []time.Duration
}

func main() {
	wardenBin := flag.String("warden", "bin/warden", "warden binary to measure")
	n := flag.Int("n", 50, "measured rounds")
	warmup := flag.Int("warmup", 5, "unmeasured rounds first")
	python := flag.String("python", "/usr/bin/python3", "python interpreter (must live under /usr)")
	flag.Parse()

	prog := []string{*python, "-c", "print(1)"}
	cs := []*contender{
		{name: "bare", argv: prog},
		{name: "warden", argv: append([]string{*wardenBin, "run", "--"}, prog...)},
		{name: "warden (no cgroup limits)", argv: append([]string{*wardenBin, "run", "--memory", "0", "--cpus", "0", "--pids", "0", "--"}, prog...)},
		bwrap(prog),
	}
	for _, c := range cs {
		if c.skip == "" {
			if out, err := exec.Command(c.argv[0], c.argv[1:]...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1" {
				c.skip = fmt.Sprintf("does not print 1 here: %v %q", err, out)
			}
		}
	}
	for round := 0; round < *warmup+*n; round++ {
		for _, c := range cs {
			if c.skip != "" {
				continue
			}
			d, err := timeRun(c.argv)
			if err != nil {
				fmt.Fprintf(os.Stderr, "coldstart: %s: %v\n", c.name, err)
				os.Exit(1)
			}
			if round >= *warmup {
				c.samples = append(c.samples, d)
			}
		}
	}
	report(cs)
	measureNamespaces(*n)
}

func bwrap(prog []string) *contender {
	c := &contender{name: "bubblewrap --unshare-all"}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		c.skip = "bwrap not installed (apt-get install bubblewrap)"
		return c
	}
	c.argv = append([]string{path, "--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp"}, prog...)
	return c
}

func timeRun(argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if strings.TrimSpace(string(out)) != "1" {
		return 0, fmt.Errorf("printed %q", out)
	}
	return d, nil
}

func report(cs []*contender) {
	if cs[0].skip != "" {
		fmt.Printf("no baseline: the bare process %s\n", cs[0].skip)
		return
	}
	base := median(cs[0].samples)
	fmt.Printf("| contender | median ms | p90 ms | ratio to bare |\n|---|---:|---:|---:|\n")
	for _, c := range cs {
		if c.skip != "" {
			fmt.Printf("| %s | skipped: %s | | |\n", c.name, c.skip)
			continue
		}
		m := median(c.samples)
		fmt.Printf("| %s | %.2f | %.2f | %.2fx |\n", c.name, ms(m), ms(pct(c.samples, 0.9)), float64(m)/float64(base))
	}
	fmt.Printf("\n%d rounds, interleaved; python3 -c 'print(1)'\n", len(cs[0].samples))
}

func median(s []time.Duration) time.Duration { return pct(s, 0.5) }

func pct(s []time.Duration, p float64) time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[int(p*float64(len(c)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
