package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// oomLimit is the session's --memory in TestConformanceSessionOOM.
const oomLimit = 128 << 20

// oomBomb holds 8 MB more each step, written so it is resident, and says
// how much it holds; it stops by itself at twice oomLimit, which no host
// minds, so it stays harmless where the limit is missing.
const oomBomb = `
held = []
for i in range(1, 33):
    held.append(b"x" * (8 << 20))
    print(i * 8, flush=True)
print("survived", flush=True)
`

// oomNotSame says why a backend's OOM report differs (README's backend
// table): those rows are skipped here.
var oomNotSame = map[string]string{
	"gvisor": "gVisor's own OOM kill (the pinned runsc's) reads as SIGKILL with oom_killed false; Debian's runsc has none and the whole box ends: README's backend table",
	gvisorFD: "gVisor's own OOM kill (the pinned runsc's) reads as SIGKILL with oom_killed false over either transport; Debian's runsc has none and the whole box ends: README's backend table",
	"docker": "Docker's kill is reported as SIGKILL with oom_killed false (the engine owns the container's cgroup): README's backend table",
}

// TestConformanceSessionOOM: a memory bomb in a session is killed at
// --memory and reported as an OOM kill, in an exec and in an interpreter
// cell, and the session lives on, on every backend whose cgroup Warden
// reads (native's host cgroup; microvm's guest cgroup, which its agent
// reports).
func TestConformanceSessionOOM(t *testing.T) {
	for _, b := range sessionRows(conformanceBackends(t)) {
		t.Run(b, func(t *testing.T) {
			if why := oomNotSame[b]; why != "" {
				t.Skip(why)
			}
			requireBackend(t, b)
			s := startServer(t, backendArgs(b)...)
			id := s.newSession(t, keyA, map[string]any{"limits": map[string]any{"memory_bytes": oomLimit}})
			run := func(argv ...string) spec.Result {
				var r spec.Result
				s.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/exec", map[string]any{"command": argv, "timeout_seconds": 120}, http.StatusOK, &r)
				return r
			}
			if b == "microvm" {
				// The guest's box cgroup, whose memory.max the guest
				// init set to --memory, holds the session's processes.
				if r := run("cat", "/proc/self/cgroup"); r.Stdout != "0::/box\n" {
					t.Fatalf("/proc/self/cgroup = %q (stderr %q), want the box's cgroup 0::/box: the code is not in the box's cgroup", r.Stdout, r.Stderr)
				}
			}
			r := run("python3", "-c", oomBomb)
			if !r.OOMKilled || r.Signal != "SIGKILL" || r.TimedOut {
				t.Errorf("bomb exec = oom_killed %v, signal %q, timed_out %v, stderr %q; want an OOM kill", r.OOMKilled, r.Signal, r.TimedOut, r.Stderr)
			}
			checkHeld(t, r.Stdout)
			if r := run("echo", "alive"); r.Stdout != "alive\n" || r.OOMKilled {
				t.Errorf("exec after the OOM kill = %q, oom_killed %v; want the session alive and no kill", r.Stdout, r.OOMKilled)
			}
			s.code(t, keyA, id, "python", "x = 21", nil)
			c := s.code(t, keyA, id, "python", "held = []\nfor i in range(1, 33): held.append(b'x' * (8 << 20))", map[string]any{"timeout_seconds": 120})
			if !c.OOMKilled || !c.InterpreterRestarted {
				t.Errorf("bomb cell = oom_killed %v, interpreter_restarted %v, stderr %q; want an OOM kill that ended the interpreter", c.OOMKilled, c.InterpreterRestarted, c.Stderr)
			}
			if c := s.code(t, keyA, id, "python", "6 * 7", nil); c.Value != "42" || c.OOMKilled {
				t.Errorf("cell after the OOM kill = %q, oom_killed %v (stderr %q); want 42 in a fresh interpreter", c.Value, c.OOMKilled, c.Stderr)
			}
		})
	}
}

// checkHeld fails unless the bomb was stopped at --memory: the most it
// said it held is below oomLimit (the VM's RAM, or the host, would have
// let it hold more) and it never finished.
func checkHeld(t *testing.T, stdout string) {
	t.Helper()
	lines := strings.Fields(stdout)
	if len(lines) == 0 {
		return
	}
	last := lines[len(lines)-1]
	if last == "survived" {
		t.Fatalf("the bomb held %d MB under --memory %d MiB", 32*8, oomLimit>>20)
	}
	mb, err := strconv.Atoi(last)
	if err != nil || mb<<20 > oomLimit {
		t.Errorf("the bomb last said it held %q MB, want a number of at most %d", last, oomLimit>>20)
	}
	t.Logf("the bomb was killed after it held %d MB under --memory %d MiB", mb, oomLimit>>20)
}
