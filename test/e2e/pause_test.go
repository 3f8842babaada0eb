package e2e

import (
	"net/http"
	"slices"
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

// TestPauseResumeLatency measures, on every backend, the API round trip
// of a pause and of a resume of a session whose interpreter spins, with a
// GET of the same session on the same server as the baseline (an HTTP
// round trip that touches no box), and logs p50 and p99 of each and their
// ratios to the baseline. It asserts nothing about speed (the host is
// shared and noisy): docs/sessions.md records what it printed. A
// measurement, it runs with -long only (as the long load forms do); its
// 60 rapid rounds on Docker once lost the session to an engine answer
// Warden cannot verify (docs/sessions.md, "Cost").
func TestPauseResumeLatency(t *testing.T) {
	if !*longLoad {
		t.Skip("a measurement, not a check: run it with -long")
	}
	const rounds = 60
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			srv := startServer(t, "--backend", b)
			id := srv.newSession(t, keyA, nil)
			if r := srv.code(t, keyA, id, "python", spinProbe, nil); r.ExitCode != 0 || r.Exception != nil {
				t.Fatalf("setting up: %+v", r)
			}
			var get, pause, resume []time.Duration
			for range rounds {
				get = append(get, timed(t, srv, "GET", sessionPath(id)))
				pause = append(pause, timed(t, srv, "POST", sessionPath(id, "/pause")))
				resume = append(resume, timed(t, srv, "POST", sessionPath(id, "/resume")))
			}
			base := percentile(get, 50)
			for _, m := range []struct {
				name string
				d    []time.Duration
			}{{"get (baseline)", get}, {"pause", pause}, {"resume", resume}} {
				p50, p99 := percentile(m.d, 50), percentile(m.d, 99)
				t.Logf("%s %s: p50 %v p99 %v (p50 %.1fx the baseline's)", b, m.name, p50, p99, float64(p50)/float64(base))
			}
		})
	}
}

// timed is how long one call as keyA took; any answer but 200 fails.
func timed(t *testing.T, srv *apiServer, method, path string) time.Duration {
	t.Helper()
	start := time.Now()
	code, body := srv.call(t, keyA, method, path, nil, "")
	d := time.Since(start)
	if code != http.StatusOK {
		t.Fatalf("%s %s = %d %s, want 200", method, path, code, body)
	}
	return d
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// TestAutoPause: a session made with auto_pause is paused, not ended, at
// its idle timeout, keeps its interpreter's variables, and the next exec
// resumes it.
func TestAutoPause(t *testing.T) {
	for _, b := range conformanceBackends(t) {
		t.Run(b, func(t *testing.T) {
			requireBackend(t, b)
			srv := startServer(t, "--backend", b)
			id := srv.newSession(t, keyA, map[string]any{"auto_pause": true, "idle_timeout_seconds": 1})
			if r := srv.code(t, keyA, id, "python", "x = 41", nil); r.ExitCode != 0 || r.Exception != nil {
				t.Fatalf("setting up: %+v", r)
			}
			var ses session
			for range 300 { // the reaper looks every second: at most 30 s
				srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &ses)
				if ses.State != "ready" {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if ses.State != "paused" {
				t.Fatalf("after its idle timeout: state %q, want paused", ses.State)
			}
			if r := srv.code(t, keyA, id, "python", "x + 1", nil); r.Value != "42" {
				t.Errorf("x + 1 after the auto-pause = %q (%+v), want 42", r.Value, r.Exception)
			}
		})
	}
}
