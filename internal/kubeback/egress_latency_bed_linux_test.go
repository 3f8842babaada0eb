package kubeback_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// egressRounds is how many times testEgressLatency measures each side.
const egressRounds = 20

// testEgressLatency measures, inside the sandbox by curl's own clock, an
// HTTPS request on a new connection (to the bridge, CONNECT through the
// egress proxy, TLS, the request) and a second request through the
// tunnel it left open, on a kube session (the Pod's bridge, a stream
// channel, the router's proxy) and on a native sandbox (warden run --net
// proxy, built from this tree), round by round interleaved, and logs the
// medians, the ratios kube/native and the load. Each exec first makes
// one request of its own, which is logged apart: in a native sandbox it
// is the first of the sandbox's life (its bridge's and its proxy's
// first), which a kube session, its router's proxy long started, never
// pays again. Timings are reported, never asserted; what is asserted is
// that the second request rode the open tunnel (no connection of its
// own).
func testEgressLatency(ctx context.Context, t *testing.T, m *sandbox.Manager, o origin) {
	if testing.Short() {
		t.Skip("timing is skipped under -short")
	}
	warden := buildWarden(t)
	allowed := "allowed.test:" + strconv.Itoa(o.https)
	info, err := m.Create(ctx, owner, sandbox.SessionOptions{
		Limits: spec.DefaultLimits, TTL: time.Hour,
		Network: spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{allowed}},
	})
	if err != nil {
		t.Fatalf("Create with --net proxy: %v", err)
	}
	defer func() {
		if err := m.Delete(ctx, owner, info.ID); err != nil {
			t.Error(err)
		}
	}()
	curl := "curl -sSk -m 20 -w '%{time_total} %{num_connects}\\n' "
	script := fmt.Sprintf("%s-o /dev/null https://%s/warm && %s-o /dev/null -o /dev/null https://%s/first https://%s/again", curl, allowed, curl, allowed, allowed)
	var kube, native [3][]time.Duration
	for range egressRounds {
		addTimes(t, &kube, "kube", run(ctx, t, m, info.ID, sh(script)))
		addTimes(t, &native, "native", runNative(ctx, t, warden, allowed, script))
	}
	load, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("p50 (max) of %d rounds, kube vs native: %s; %s; %s; load %s", egressRounds,
		compare("an exec's first HTTPS request", kube[0], native[0]),
		compare("HTTPS on a new connection", kube[1], native[1]),
		compare("through the open tunnel", kube[2], native[2]),
		strings.TrimSpace(string(load)))
}

// compare says what was measured, kube's and native's medians and maxima,
// and the ratio of the medians.
func compare(what string, kube, native []time.Duration) string {
	k, kmax := quantiles(kube)
	n, nmax := quantiles(native)
	return fmt.Sprintf("%s %v (%v) vs %v (%v), %.2fx", what, k, kmax, n, nmax, float64(k)/float64(n))
}

// addTimes parses curl's three lines (time_total in seconds, then
// num_connects) for the exec's first request, the request on a new
// connection and the one through its tunnel into d, failing unless the
// last made no connection of its own.
func addTimes(t *testing.T, d *[3][]time.Duration, side, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(d) {
		t.Fatalf("%s: curl wrote %q, want %d lines of time_total and num_connects", side, out, len(d))
	}
	for i, l := range lines {
		var secs float64
		var conns int
		if _, err := fmt.Sscanf(l, "%g %d", &secs, &conns); err != nil {
			t.Fatalf("%s: curl's line %q: %v", side, l, err)
		}
		if i == len(d)-1 && conns != 0 {
			t.Errorf("%s: the request through the tunnel made %d connections, want 0", side, conns)
		}
		d[i] = append(d[i], time.Duration(secs*float64(time.Second)))
	}
}

// runNative runs script in a native sandbox with --net proxy allowing
// allowed (warden run: its own egress proxy, which reads agent.HostsEnv
// from the environment this test set) and returns its stdout.
func runNative(ctx context.Context, t *testing.T, warden, allowed, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, warden, "run", "--net", "proxy", "--allow", allowed, "--", "sh", "-c", script)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("warden run --net proxy: %v: %s", err, stderr.String())
	}
	return string(out)
}

// buildWarden builds the slim warden (what make build ships as
// bin/warden, which runs warden run itself) into a directory of the
// test's.
func buildWarden(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "warden")
	cmd := exec.Command(testhost.RequireTool(t, "go"), "build", "-tags", "slim", "-o", bin, "github.com/warden-sandbox/warden/cmd/warden")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building warden: %v: %s", err, out)
	}
	return bin
}
