package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// benchEnv turns TestE2BBenchmark on: it measures, it checks nothing, and
// takes about two minutes (make benchmark-e2b).
const benchEnv = "WARDEN_E2B_BENCH"

// TestE2BBenchmark measures, in one run against one `warden serve
// --pool 2`: Sandbox.create() + the first commands.run('true') next to
// Warden's own create + exec of `true` (targets: p50 ≤ 30 ms, reported
// with p99), and runCode('1+1') next to Warden's own exec of 1+1 on the
// same session (target: ratio of p50s ≤ 2). Exec and start pacing are off
// so that what is measured is the API, not the per-key budget. It writes
// the figures as one JSON line to $WARDEN_E2B_BENCH_OUT when set.
func TestE2BBenchmark(t *testing.T) {
	if os.Getenv(benchEnv) != "1" {
		t.Skipf("a benchmark: set %s=1 (make benchmark-e2b)", benchEnv)
	}
	node := requireE2BPackages(t)
	srv := e2bServer(t, "--pool", "2", "--exec-pace", "0")
	out, stderr, err := runNode(t, node, srv, "scripts/bench.mjs")
	if err != nil {
		t.Fatalf("node bench.mjs: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	line := strings.TrimSpace(out)
	var figures map[string]any
	if err := json.Unmarshal([]byte(line), &figures); err != nil {
		t.Fatalf("bench.mjs printed %q, not one JSON line: %v", out, err)
	}
	t.Logf("E2B benchmark (ms): %s", line)
	if p := os.Getenv("WARDEN_E2B_BENCH_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(line+"\n"), 0o644); err != nil {
			t.Fatalf("writing %s: %v", p, err)
		}
	}
}
