package gvisor

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// heldRelays opens 64 connections to the box's egress bridge and
// holds each with half a request, so that the bridge keeps a relay and a
// stream channel open for every one while the test looks.
const heldRelays = `import socket
held = []
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", %d), timeout=20)
    s.sendall(b"GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n")
    held.append(s)
len(held)
`

// userAgentThreads, run as gVisor's root by runsc exec, prints the
// user's agent's RLIMIT_NPROC and the most threads it ran over %d
// samples. It reads a /proc of the box's first PID namespace, mounted for
// the while: the box's /proc is the user's agent's namespace's, whose
// pid 1, the user's agent, is not dumpable.
const userAgentThreads = `set -e; d=$(mktemp -d); mount -t proc proc $d; trap 'umount $d; rmdir $d' EXIT
p=; for f in $d/[0-9]*/cmdline; do case "$(tr '\0' ' ' <$f)" in "/.warden/warden-init user-agent "*) p=${f%%/cmdline};; esac; done
awk '/^Max processes/{print $3}' $p/limits
m=0; for i in $(seq %d); do t=$(awk '/^Threads:/{print $2}' $p/status); if [ "$t" -gt "$m" ]; then m=$t; fi; sleep 0.05; done; echo $m`

// TestUserAgentThreadsEgress: the user's agent of a stream box with the
// egress proxy stays within the threads RLIMIT_NPROC leaves it above
// --pids (nsinit's userAgentTasks) while its bridge holds 64 relays open,
// an interpreter runs and an exec starts: were it over, a user who filled
// RLIMIT_NPROC first would make its next thread fail, and the session
// with it. It logs the counts it measured.
func TestUserAgentThreadsEgress(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	r := &Runtime{Stream: true}
	s := proxySpec("example.org")
	sess := startBoxOn(t, r, s)
	idle, nproc := maxThreads(t, r, sess, 10)
	allowance := int64(nproc) - s.Limits.Pids
	py := newFetcher(t, sess)
	defer closeInterp(t, py)
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	out, err := py.Run(ctx, fmt.Sprintf(heldRelays, agent.EgressPort), nil, nil)
	if err != nil || out.Exception != nil || out.Value != "64" {
		t.Fatalf("holding 64 connections through the bridge: %+v, %v", out, err)
	}
	execDone := make(chan error, 1)
	go func() {
		_, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", "sleep 1; true"}}, agent.IO{})
		execDone <- err
	}()
	busy, _ := maxThreads(t, r, sess, 40)
	if err := <-execDone; err != nil {
		t.Errorf("the exec while the bridge was busy: %v", err)
	}
	t.Logf("the user's agent's threads: %d idle, %d with 64 relays held and an exec; its allowance %d", idle, busy, allowance)
	if int64(busy) > allowance {
		t.Errorf("the user's agent ran %d threads with its bridge busy, over the %d RLIMIT_NPROC leaves it above --pids %d (userAgentTasks)", busy, allowance, s.Limits.Pids)
	}
}

// maxThreads is the most threads the user's agent of sess, a box of r,
// ran over n samples, and its RLIMIT_NPROC, read by runsc exec.
func maxThreads(t *testing.T, r *Runtime, sess *agent.Session, n int) (threads, nproc int) {
	t.Helper()
	b := r.boxOf(sess)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.runsc, r.args("exec", "--user", "0:0", "--cap", "CAP_SYS_ADMIN", "--cap", "CAP_SYS_PTRACE", b.id, "sh", "-c", fmt.Sprintf(userAgentThreads, n))...).Output()
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 2 {
		t.Fatalf("runsc exec printed %q, %v; want the user's agent's RLIMIT_NPROC and threads", out, err)
	}
	if nproc, err = strconv.Atoi(lines[0]); err != nil {
		t.Fatalf("RLIMIT_NPROC: %q", lines[0])
	}
	if threads, err = strconv.Atoi(lines[1]); err != nil {
		t.Fatalf("the user's agent's threads: %q", lines[1])
	}
	return threads, nproc
}
