package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/gvisor"
)

// agentThreadsProbe, run by `runsc exec` as root in a box, mounts a /proc
// of the box's first PID namespace (the box's own /proc is the user's
// namespace's, where the uid-0 agent has no id) and prints the
// credentials of every thread of the uid-0 agent, PID 1 there (tids up to
// 64; gVisor refuses to list the directory to this process).
const agentThreadsProbe = `d=$(mktemp -d) && mount -t proc proc $d || exit 1
i=1; while [ $i -le 64 ]; do
  if [ -r $d/$i/status ] && grep -q "^Tgid:	1$" $d/$i/status; then
    echo "tid $i: $(grep -E '^(Uid|CapPrm|CapEff|CapBnd|CapAmb):' $d/$i/status | tr '\t\n' '  ')"
  fi
  i=$((i+1))
done`

// noAgentCaps matches a probe line of a thread with no capability left.
var noAgentCaps = regexp.MustCompile(`CapPrm: 0+ CapEff: 0+ CapBnd: 0+(\s|$)`)

// TestGVisorRootAgentKeepsNoCapabilities: once the user's agent has
// started, the uid-0 agent (which only waits for it and serves the egress
// bridge) holds no capability and an empty bounding set on every one of
// its threads; before, it kept CAP_SETUID, CAP_SETGID and CAP_KILL, and
// its other threads CAP_SETPCAP too and a bounding set with
// CAP_SYS_ADMIN. It is read from the host, as the user cannot see it.
func TestGVisorRootAgentKeepsNoCapabilities(t *testing.T) {
	requireSandbox(t)
	requireBackend(t, "gvisor")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wardenBin, "run", "--backend", "gvisor", "--timeout", "60s", "--", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	// The box's runsc must read its state: warden's (FindRunsc), not
	// whichever is first on PATH.
	bin, err := gvisor.FindRunsc("")
	if err != nil {
		t.Fatal(err)
	}
	runsc := []string{"--root", filepath.Join(gvisor.StateDir, "runsc")}
	var id string
	glob := filepath.Join(gvisor.StateDir, "box-warden-"+strconv.Itoa(cmd.Process.Pid)+"-*")
	var out string
	if !waitFor(30*time.Second, func() bool {
		boxes, _ := filepath.Glob(glob)
		if len(boxes) != 1 {
			return false
		}
		id = strings.TrimPrefix(filepath.Base(boxes[0]), "box-")
		b, _ := exec.CommandContext(ctx, bin, append(runsc, "exec", "--user", "0:0", "--cap", "CAP_SYS_ADMIN", id, "/bin/sh", "-c", agentThreadsProbe)...).CombinedOutput()
		out = string(b)
		// The agent locks down just after starting the user's agent, so
		// a read can land before it: wait, bounded, for the end state.
		return strings.Contains(out, "tid 1:") && len(capsKept(out)) == 0
	}) && !strings.Contains(out, "tid 1:") {
		t.Fatalf("could not read the uid-0 agent's threads of box %q (%s): %q", id, glob, out)
	}
	for _, line := range capsKept(out) {
		t.Errorf("uid-0 agent thread %q after 30 s; want no permitted, effective or bounding capability", line)
	}
	t.Logf("uid-0 agent's threads:\n%s", out)
}

// capsKept are the probe's lines of threads that still hold a capability.
func capsKept(out string) []string {
	var kept []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !noAgentCaps.MatchString(line) {
			kept = append(kept, line)
		}
	}
	return kept
}
