package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// The differential test runs every spec twice, under `warden run
// --executor go` and `--executor fast`, and compares what the program
// sees. A warden without the flag (before the fast executor lands) is
// compared with itself, which proves the comparison: both runs take the
// Go init, so any difference is the test's own noise.

// executorSide is one of the two runs: a name for messages and the
// flags that choose its executor.
type executorSide struct {
	name  string
	flags []string
}

// executorPair is the two sides, and why the second is not the fast
// executor when it is not.
type executorPair struct {
	sides [2]executorSide
	note  string
}

var (
	pairOnce sync.Once
	pair     executorPair
	pairSkip string
	// pairErr stays set when choosing the pair did not finish (a Fatal
	// in the test that ran it first), so no later test takes the zero
	// pair and compares nothing.
	pairErr string
)

// executors returns the pair to compare. Without --executor in this
// warden it is go against go (logged); with it, fast must start a
// program, or the test skips with the binary's own reason when warden
// says the fast executor is unavailable (fails under WARDEN_CI=1), and
// fails on any other outcome.
func executors(t *testing.T) executorPair {
	t.Helper()
	requireSandbox(t)
	pairOnce.Do(func() {
		pairErr = "choosing the executors did not finish: see the first executor test's failure"
		pair, pairSkip, pairErr = choosePair(t)
	})
	if pairErr != "" {
		t.Fatal(pairErr)
	}
	if pairSkip != "" {
		testhost.SkipOrFail(t, pairSkip)
	}
	if pair.note != "" {
		t.Log(pair.note)
	}
	return pair
}

// choosePair asks the binary which executors it has: the pair, a reason
// to skip, or an error.
func choosePair(t *testing.T) (executorPair, string, string) {
	t.Helper()
	help := warden(t, "", "run", "--help")
	if !strings.Contains(help.stdout+help.stderr, "--executor") {
		return executorPair{
			sides: [2]executorSide{{name: "go"}, {name: "go again"}},
			note:  "this warden has no --executor flag: comparing the Go init with itself",
		}, "", ""
	}
	p := executorPair{sides: [2]executorSide{
		{name: "go", flags: []string{"--executor", "go"}},
		{name: "fast", flags: []string{"--executor", "fast"}},
	}}
	inv := warden(t, "", "run", "--executor", "fast", "--", "true")
	switch {
	case inv.code == 0:
		return p, "", ""
	case fastUnavailable(inv):
		return p, "the fast executor is not available: " + strings.TrimSpace(inv.stderr), ""
	}
	return p, "", "warden run --executor fast -- true: exit " + strconv.Itoa(inv.code) + ", stdout " +
		strconv.Quote(inv.stdout) + ", stderr " + strconv.Quote(inv.stderr) +
		"; want exit 0, or 125 with one line saying warden-exec is unavailable"
}

// fastUnavailable says whether inv is warden refusing --executor fast
// because warden-exec cannot run (not built, not trusted, or not yet
// started by this warden): exit 125 and one `warden: --executor fast:`
// line naming warden-exec.
func fastUnavailable(inv invocation) bool {
	msg := strings.TrimSuffix(inv.stderr, "\n")
	return inv.code == 125 && !strings.Contains(msg, "\n") &&
		strings.HasPrefix(msg, "warden: --executor fast") && strings.Contains(msg, "warden-exec")
}

// fastRefused says whether inv is warden refusing --executor fast for
// this spec (a one-line error naming the flag), as it may for --net
// proxy, whose egress proxy needs the Go init.
func fastRefused(inv invocation) bool {
	return inv.code == 125 && strings.HasPrefix(inv.stderr, "warden: --executor fast")
}

var (
	diffProbeOnce sync.Once
	diffProbeDir  string
	diffProbeErr  error
)

// diffProbeWorkspace returns a host directory, owned by workspaceOwner
// and readable by everyone, holding only the built testdata/diffprobe.
func diffProbeWorkspace(t *testing.T) string {
	t.Helper()
	requireSandbox(t)
	diffProbeOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(wardenBin), "diffprobe-ws")
		if diffProbeErr = os.Mkdir(dir, 0o755); diffProbeErr != nil {
			return
		}
		if diffProbeErr = os.Chmod(dir, 0o755); diffProbeErr != nil {
			return
		}
		if diffProbeErr = os.Chown(dir, workspaceOwner, workspaceOwner); diffProbeErr != nil {
			return
		}
		var out []byte
		if out, diffProbeErr = goBuild(filepath.Join(dir, "diffprobe"), "./testdata/diffprobe", nil); diffProbeErr != nil {
			diffProbeErr = &buildError{err: diffProbeErr, out: out}
			return
		}
		diffProbeDir = dir
	})
	if diffProbeErr != nil {
		t.Fatalf("building testdata/diffprobe: %v", diffProbeErr)
	}
	return diffProbeDir
}
