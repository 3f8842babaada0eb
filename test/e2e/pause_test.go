package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// spinProbe starts a thread in the session's Python interpreter that
// spins and records the longest gap it ever saw between two of its turns:
// a box that really stopped for a pause shows a gap as long as the pause.
const spinProbe = `
import threading, time
gap = 0.0
def _spin():
    global gap
    last = time.monotonic()
    while True:
        now = time.monotonic()
        gap = max(gap, now - last)
        last = now
threading.Thread(target=_spin, daemon=True).start()
`

// pauseFor is how long the test keeps a box paused: far longer than any
// gap a spinning thread sees between its turns on a running box.
const pauseFor = 1500 * time.Millisecond

// TestPauseResume pauses and resumes a session on every backend: its
// interpreter's variables survive, its processes do not run while it is
// paused, and an exec resumes it.
func TestPauseResume(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			srv := startServer(t, "--backend", b)
			id := srv.newSession(t, keyA, nil)
			if r := srv.code(t, keyA, id, "python", "x = 41\n"+spinProbe, nil); r.ExitCode != 0 || r.Exception != nil {
				t.Fatalf("setting up: %+v", r)
			}
			var ses session
			srv.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, &ses)
			if ses.State != "paused" {
				t.Fatalf("after pause: state %q, want paused", ses.State)
			}
			if code, body := srv.call(t, keyB, "POST", sessionPath(id, "/pause"), nil, ""); code != http.StatusNotFound {
				t.Errorf("another key's pause = %d %s, want 404", code, body)
			}
			time.Sleep(pauseFor)
			srv.jsonCall(t, keyA, "POST", sessionPath(id, "/resume"), nil, http.StatusOK, &ses)
			if ses.State != "ready" {
				t.Fatalf("after resume: state %q, want ready", ses.State)
			}
			if r := srv.code(t, keyA, id, "python", "x + 1", nil); r.Value != "42" {
				t.Errorf("x + 1 after pause and resume = %q (%+v), want 42", r.Value, r.Exception)
			}
			r := srv.code(t, keyA, id, "python", "gap", nil)
			gap, err := strconv.ParseFloat(r.Value, 64)
			if err != nil || gap < pauseFor.Seconds()*0.9 {
				t.Errorf("longest gap the spinning thread saw = %q, want at least the %v pause: the box ran while paused", r.Value, pauseFor)
			}
			srv.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, &ses)
			if r := srv.code(t, keyA, id, "python", "x * 2", nil); r.Value != "82" {
				t.Errorf("exec on a paused session = %q (%+v), want 82: the exec resumes it", r.Value, r.Exception)
			}
			srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &ses)
			if ses.State != "ready" {
				t.Errorf("after an exec on a paused session: state %q, want ready", ses.State)
			}
			// A paused session is deleted as any other: its box ends.
			srv.jsonCall(t, keyA, "POST", sessionPath(id, "/pause"), nil, http.StatusOK, &ses)
			if code, body := srv.call(t, keyA, "DELETE", sessionPath(id), nil, ""); code != http.StatusNoContent {
				t.Errorf("DELETE of a paused session = %d %s, want 204", code, strings.TrimSpace(string(body)))
			}
		})
	}
}
