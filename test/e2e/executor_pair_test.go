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
)

// executors returns the pair to compare. Without --executor in this
// warden it is go against go (logged); with it, fast must start a
// program, or the test skips with the binary's own reason (fails under
// WARDEN_CI=1).
func executors(t *testing.T) executorPair {
	t.Helper()
	requireSandbox(t)
	pairOnce.Do(func() {
		help := warden(t, "", "run", "--help")
		if !strings.Contains(help.stdout+help.stderr, "--executor") {
			pair = executorPair{
				sides: [2]executorSide{{name: "go"}, {name: "go again"}},
				note:  "this warden has no --executor flag: comparing the Go init with itself",
			}
			return
		}
		pair = executorPair{sides: [2]executorSide{
			{name: "go", flags: []string{"--executor", "go"}},
			{name: "fast", flags: []string{"--executor", "fast"}},
		}}
		if inv := warden(t, "", "run", "--executor", "fast", "--", "true"); inv.code != 0 {
			pairSkip = "the fast executor is not available: exit " + strconv.Itoa(inv.code) + ": " + strings.TrimSpace(inv.stderr)
		}
	})
	if pairSkip != "" {
		testhost.SkipOrFail(t, pairSkip)
	}
	if pair.note != "" {
		t.Log(pair.note)
	}
	return pair
}

// fastRefused says whether inv is warden refusing --executor fast for
// this spec (a one-line error naming the flag), as it may for --net
// proxy, whose egress proxy needs the Go init.
func fastRefused(inv invocation) bool {
	return inv.code == 125 && strings.Contains(inv.stdout+inv.stderr, "--executor fast")
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
