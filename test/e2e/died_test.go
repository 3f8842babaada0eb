package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDiedSessionAnswers409 ends a session's sandbox from outside its
// exec and checks what the session answers once it stops saying ready:
// dead, with the reason, and 409 to an exec (api/openapi.yaml: a dead
// session's execs answer 409), not 404 as if it had never been. Native
// keeps a persistent workspace (the test server has a state directory)
// and its init is killed from the host; gVisor keeps none, and its box
// ends when a program goes over its memory (README: Backends).
func TestDiedSessionAnswers409(t *testing.T) {
	for _, b := range []string{"native", "gvisor"} {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			srv := startServer(t, "--backend", b)
			id := srv.newSession(t, keyA, map[string]any{"limits": map[string]any{"memory_bytes": 128 << 20}})
			if b == "native" {
				killInit(t, srv, id)
			} else {
				code, body := srv.call(t, keyA, "POST", sessionPath(id, "/exec"), strings.NewReader(`{"command":["python3","-c","b = bytearray(1 << 30)"]}`), "application/json")
				if code != http.StatusConflict || !bytes.Contains(body, []byte("ended during the exec")) {
					t.Errorf("exec that ended the box = %d %s, want 409 saying the session ended during it", code, body)
				}
			}
			checkDead(t, srv, id)
		})
	}
}

// killInit kills session id's init from the host.
func killInit(t *testing.T, srv *apiServer, id string) {
	t.Helper()
	marker := "died-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	execIn(t, srv, id, "touch /workspace/"+marker)
	pid := sandboxInitWith(t, marker)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the session's init (pid %d): %v", pid, err)
	}
}

// checkDead waits (bounded) until session id stops saying ready, then
// wants it dead with the reason, 409 to an exec, and 204 to a DELETE.
func checkDead(t *testing.T, srv *apiServer, id string) {
	t.Helper()
	var got sessionState
	changed := waitFor(30*time.Second, func() bool {
		code, b := srv.call(t, keyA, "GET", sessionPath(id), nil, "")
		return code != http.StatusOK || json.Unmarshal(b, &got) != nil || got.State != "ready"
	})
	code, b := srv.call(t, keyA, "GET", sessionPath(id), nil, "")
	if !changed || code != http.StatusOK || json.Unmarshal(b, &got) != nil || got.State != "dead" || !strings.Contains(got.Reason, "ended unexpectedly") {
		t.Errorf("GET of the session whose sandbox ended = %d %s, want 200, dead, the reason saying its sandbox ended", code, b)
	}
	code, b = srv.call(t, keyA, "POST", sessionPath(id, "/exec"), strings.NewReader(`{"command":["true"]}`), "application/json")
	if code != http.StatusConflict || !bytes.Contains(b, []byte("died")) || !bytes.Contains(b, []byte("delete it when done")) {
		t.Errorf("exec in the dead session = %d %s, want 409 saying it died and to delete it", code, b)
	}
	if code, b := srv.call(t, keyA, "DELETE", sessionPath(id), nil, ""); code != http.StatusNoContent {
		t.Errorf("DELETE of the dead session = %d %s, want 204", code, b)
	}
}

// execIn runs script in session id and fails the test unless it exits 0.
func execIn(t *testing.T, srv *apiServer, id, script string) {
	t.Helper()
	code, b := srv.call(t, keyA, "POST", sessionPath(id, "/exec"), strings.NewReader(`{"command":["sh","-c",`+strconv.Quote(script)+`]}`), "application/json")
	if code != http.StatusOK || !bytes.Contains(b, []byte(`"exit_code":0`)) {
		t.Fatalf("exec %q = %d %s, want 200 and exit 0", script, code, b)
	}
}

// sandboxInitWith finds, among the host's processes, the init (PID 1 of
// its own PID namespace) whose /workspace holds a file named marker.
func sandboxInitWith(t *testing.T, marker string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isNamespaceInit(pid) {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", e.Name(), "root/workspace", marker)); err == nil {
			return pid
		}
	}
	t.Fatalf("no sandbox init has /workspace/%s", marker)
	return 0
}

// isNamespaceInit says the host's process pid is PID 1 of a PID namespace
// of its own (the last NSpid of its status is 1).
func isNamespaceInit(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" {
			return f[len(f)-1] == "1"
		}
	}
	return false
}
