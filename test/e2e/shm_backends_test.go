package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// shmLimit is the session's --memory in TestConformanceSessionShm.
const shmLimit = 64 << 20

// shmLeaver makes two SysV shared memory segments of 24 MiB, writes them
// so their pages are charged to the box, and exits without removing
// them: 48 MiB in all, which is bounded and harmless anywhere.
const shmLeaver = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
for i in range(2):
    sid = libc.shmget(0, 24 << 20, 0o1600)
    if sid < 0:
        raise OSError(ctypes.get_errno(), "shmget")
    p = libc.shmat(sid, None, 0)
    if p is None or p == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "shmat")
    ctypes.memset(p, 120, 24 << 20)
    print(sid, flush=True)
`

// shmRemover removes the segments whose ids it is given, ignoring ids
// already gone.
const shmRemover = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for sid in sys.argv[1:]:
    libc.shmctl(int(sid), 0, None)
`

// msgMaker makes SysV message queues until the kernel refuses one, at
// most 64, prints their ids and leaves them: with the session's limit
// (nsinit.MsgQueues) it stops early, and 64 empty queues are harmless
// anywhere.
const msgMaker = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for i in range(64):
    q = libc.msgget(0, 0o1600)
    if q < 0:
        break
    print(q, flush=True)
`

// msgRemover removes the message queues whose ids it is given, ignoring
// ids already gone.
const msgRemover = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for q in sys.argv[1:]:
    libc.msgctl(int(q), 0, None)
`

// shmRows are the rows whose box has an IPC namespace Warden sets up
// (gVisor's and Docker's are the runtime's own).
var shmRows = map[string]bool{"microvm": true, "native": true, nativeStream: true}

// TestConformanceSessionShm: SysV shared memory left by a finished exec
// is removed with it (kernel.shm_rmid_forced in the box's IPC namespace),
// so segments filling --memory cannot wedge the session: the next exec
// runs; SysV message queues, which nothing removes, are limited to
// nsinit.MsgQueues. Without the setting the segments stayed (this test failed on
// both backends), and 56 MiB of them at 64 MiB hung every later process
// of a microvm session until its timeout.
func TestConformanceSessionShm(t *testing.T) {
	for _, b := range sessionRows(conformanceBackends(t)) {
		t.Run(b, func(t *testing.T) {
			if !shmRows[b] {
				t.Skip("the runtime owns this box's IPC namespace")
			}
			requireBackend(t, b)
			s := startServer(t, backendArgs(b)...)
			id := s.newSession(t, keyA, map[string]any{"limits": map[string]any{"memory_bytes": shmLimit}})
			run := func(argv ...string) spec.Result {
				var r spec.Result
				s.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/exec", map[string]any{"command": argv, "timeout_seconds": 30}, http.StatusOK, &r)
				return r
			}
			r := run("python3", "-c", shmLeaver)
			ids := strings.Fields(r.Stdout)
			if r.ExitCode != 0 || len(ids) != 2 {
				t.Fatalf("making the segments = exit %d, stdout %q, stderr %q; want two segment ids", r.ExitCode, r.Stdout, r.Stderr)
			}
			// Should the box share an IPC namespace it must not, the
			// segments are removed all the same (already gone: EINVAL).
			defer run("python3", "-c", shmRemover, ids[0], ids[1])
			if r := run("cat", "/proc/sysvipc/shm"); !onlyShmHeader(r) {
				t.Errorf("/proc/sysvipc/shm after the exec = exit %d, %q (stderr %q), want exit 0 and only its header: the segments outlived their process", r.ExitCode, r.Stdout, r.Stderr)
			}
			// Message queues outlive their process too: the session holds
			// only nsinit.MsgQueues of them.
			q := run("python3", "-c", msgMaker)
			qs := strings.Fields(q.Stdout)
			defer run(append([]string{"python3", "-c", msgRemover}, qs...)...)
			if q.ExitCode != 0 || len(qs) != nsinit.MsgQueues {
				t.Errorf("making message queues = exit %d, %d queues (stderr %q); want exit 0 and %d: kernel.msgmni is not the session's limit", q.ExitCode, len(qs), q.Stderr, nsinit.MsgQueues)
			}
			if r := run("python3", "-c", "print(1)"); r.Stdout != "1\n" || r.TimedOut || r.OOMKilled {
				t.Errorf("exec after the segments = %q, timed_out %v, oom_killed %v, stderr %q; want 1: the session is wedged", r.Stdout, r.TimedOut, r.OOMKilled, r.Stderr)
			}
		})
	}
}

// onlyShmHeader says the read of /proc/sysvipc/shm succeeded and listed no
// segment: one line, its header (which starts with "key"). A failed read
// or an empty output proves nothing, so neither passes.
func onlyShmHeader(r spec.Result) bool {
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	return r.ExitCode == 0 && len(lines) == 1 && strings.HasPrefix(strings.TrimSpace(lines[0]), "key")
}
