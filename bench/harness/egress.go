//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// egressThroughput is (h): bench/egress (a 100 MiB download from a stand-in
// server in its own network namespace), direct and through the proxy,
// read from its table.
func egressThroughput(o options) Section {
	s := Section{ID: "h", Title: "download throughput through the egress proxy vs direct (MB/s)", Baseline: "direct"}
	bin := filepath.Join(os.TempDir(), fmt.Sprintf("warden-harness-egress-%d", os.Getpid()))
	defer os.Remove(bin)
	if out, err := exec.Command("go", "build", "-o", bin, "./bench/egress").CombinedOutput(); err != nil {
		s.Rows = []Row{{Contender: "direct", Skipped: "building bench/egress: " + tail(out)}}
		return s
	}
	out, err := exec.Command(bin, "-warden", o.warden, "-n", strconv.Itoa(o.egressRounds)).CombinedOutput()
	if err != nil {
		s.Rows = []Row{{Contender: "direct", Skipped: "bench/egress: " + tail(out)}}
		return s
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) < 4 {
			continue
		}
		mbs, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err != nil {
			continue
		}
		s.Rows = append(s.Rows, Row{Workload: "h", Contender: strings.TrimSpace(f[1]), Unit: "MB/s", Samples: []float64{mbs}})
	}
	if len(s.Rows) > 0 {
		s.Baseline = s.Rows[0].Contender
	}
	return s
}
