package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestSessionNotebook runs a notebook-like sequence through the HTTP API:
// state kept across execs, a trailing value, a structured exception, a
// chart returned as PNG without savefig, and files kept across execs.
func TestSessionNotebook(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)

	if r := srv.code(t, keyA, id, "python", "import math\nx = 41", nil); r.ExitCode != 0 || r.Exception != nil {
		t.Fatalf("first cell = %+v, want success", r)
	}
	if r := srv.code(t, keyA, id, "python", "x + 1", nil); r.Value != "42" {
		t.Errorf("x + 1 value = %q (stderr %q), want 42: variables must persist", r.Value, r.Stderr)
	}
	r := srv.code(t, keyA, id, "python", "1/0", nil)
	if r.Exception == nil || r.Exception.Type != "ZeroDivisionError" || !strings.Contains(r.Exception.Traceback, "ZeroDivisionError") {
		t.Errorf("1/0 exception = %+v, want a ZeroDivisionError with its traceback", r.Exception)
	}
	chart := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nprint('drawn')"
	r = srv.code(t, keyA, id, "python", chart, nil)
	if r.Stdout != "drawn\n" || len(r.Outputs) != 1 || r.Outputs[0].MimeType != "image/png" {
		t.Fatalf("chart cell = stdout %q, stderr %q, outputs %d; want one image/png", r.Stdout, r.Stderr, len(r.Outputs))
	}
	png, err := base64.StdEncoding.DecodeString(r.Outputs[0].Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Errorf("chart = %d bytes (err %v), want a PNG of at least 1000 bytes", len(png), err)
	}
	srv.code(t, keyA, id, "python", "open('/workspace/data.txt', 'w').write('from python')", nil)
	var shell spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"cat", "data.txt"}}, http.StatusOK, &shell)
	if shell.Stdout != "from python" {
		t.Errorf("cat data.txt = %q, want the file the python cell wrote", shell.Stdout)
	}
}

// TestSessionTimeoutKeepsSession checks that an exec's timeout kills that
// exec only: the interpreter restarts fresh, files stay, the session lives.
func TestSessionTimeoutKeepsSession(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)
	srv.code(t, keyA, id, "python", "y = 1\nopen('kept', 'w').write('yes')", nil)
	r := srv.code(t, keyA, id, "python", "while True: pass", map[string]any{"timeout_seconds": 1})
	if !r.TimedOut || !r.InterpreterRestarted {
		t.Fatalf("endless cell = timed_out %v, restarted %v; want both", r.TimedOut, r.InterpreterRestarted)
	}
	r = srv.code(t, keyA, id, "python", "print(open('kept').read()); 'y' in globals()", nil)
	if r.Stdout != "yes\n" || r.Value != "False" {
		t.Errorf("after the timeout = stdout %q value %q (stderr %q); want the file kept and a fresh interpreter", r.Stdout, r.Value, r.Stderr)
	}
	r = srv.code(t, keyA, id, "python", "import os; os.kill(os.getpid(), 9)", nil)
	if !r.InterpreterRestarted {
		t.Errorf("self-kill = %+v, want interpreter_restarted", r)
	}
	if r := srv.code(t, keyA, id, "python", "2 * 21", nil); r.Value != "42" {
		t.Errorf("after the crash value = %q (stderr %q), want 42 from a fresh interpreter", r.Value, r.Stderr)
	}
	var cmd spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sleep", "60"}, "timeout_seconds": 0.5}, http.StatusOK, &cmd)
	if !cmd.TimedOut {
		t.Errorf("sleep 60 with a 0.5s timeout = %+v, want timed_out", cmd)
	}
	srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, nil)
}

// TestSessionFiles round-trips a binary file and tries the planted-link
// attacks: a link to the host's /etc/shadow, a linked directory, and a link
// into another session's workspace.
func TestSessionFiles(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)
	other := srv.newSession(t, keyA, nil)
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	if code, b := srv.call(t, keyA, "PUT", sessionPath(id, "/files?path=dir/blob.bin"), bytes.NewReader(data), "application/octet-stream"); code != http.StatusCreated {
		t.Fatalf("upload = %d %s, want 201", code, b)
	}
	code, got := srv.call(t, keyA, "GET", sessionPath(id, "/files?path=dir/blob.bin"), nil, "")
	if code != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("download = %d, %d bytes equal %v; want 200 and the same 1 MiB", code, len(got), bytes.Equal(got, data))
	}
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sha256sum", "dir/blob.bin"}}, http.StatusOK, &r)
	if r.ExitCode != 0 {
		t.Errorf("the sandbox cannot read the uploaded file: %+v", r)
	}

	otherPid := srv.sessionInitPid(t, other)
	plant := "ln -s /etc/shadow evil && ln -s /etc evildir && ln -s /proc/" + strconv.Itoa(otherPid) + "/root/workspace theirs"
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c", plant}}, http.StatusOK, &r)
	shadow, _ := os.ReadFile("/etc/shadow")
	attacks := []struct{ method, path string }{
		{"GET", "/files?path=evil"},
		{"GET", "/files?path=evildir/shadow"},
		{"PUT", "/files?path=evildir/warden-e2e-must-not-exist"},
		{"GET", "/files?path=theirs/secret"},
		{"PUT", "/files?path=theirs/planted"},
		{"GET", "/files?path=../../etc/shadow"},
		{"GET", "/files?path=/etc/shadow"},
	}
	for _, a := range attacks {
		code, b := srv.call(t, keyA, a.method, sessionPath(id, a.path), strings.NewReader("x"), "application/octet-stream")
		if code < 400 || code >= 500 || (len(shadow) > 0 && bytes.Contains(b, shadow[:min(len(shadow), 16)])) {
			t.Errorf("%s %s = %d %q, want a 4xx refusal", a.method, a.path, code, b)
		}
	}
	if _, err := os.Stat("/etc/warden-e2e-must-not-exist"); err == nil {
		t.Error("an upload through a planted link created a file in the host's /etc")
	}
	srv.jsonCall(t, keyA, "POST", sessionPath(other, "/exec"), map[string]any{"command": []string{"ls", "-A"}}, http.StatusOK, &r)
	if r.Stdout != ".marker\n" {
		t.Errorf("the other session's workspace = %q, want only its own marker", r.Stdout)
	}
	// Uploading onto a planted link replaces the link, never its target.
	if code, b := srv.call(t, keyA, "PUT", sessionPath(id, "/files?path=evil"), strings.NewReader("mine"), "application/octet-stream"); code != http.StatusCreated {
		t.Fatalf("upload onto the link = %d %s, want 201", code, b)
	}
	if after, _ := os.ReadFile("/etc/shadow"); !bytes.Equal(after, shadow) {
		t.Fatal("/etc/shadow changed")
	}
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c", "test -L evil || cat evil"}}, http.StatusOK, &r)
	if r.Stdout != "mine" {
		t.Errorf("after the upload evil = %q, want a plain file with the upload", r.Stdout)
	}
}

// sessionInitPid finds the host pid of a session's init: the child of the
// server whose /proc root differs from the server's.
func (s *apiServer) sessionInitPid(t *testing.T, id string) int {
	t.Helper()
	var r spec.Result
	s.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c", "echo marker-" + id + " > /workspace/.marker"}}, http.StatusOK, &r)
	matches, _ := filepath.Glob("/proc/[0-9]*/root/workspace/.marker")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err == nil && strings.TrimSpace(string(b)) == "marker-"+id {
			pid, _ := strconv.Atoi(strings.Split(m, "/")[2])
			return pid
		}
	}
	t.Fatalf("no process has session %s's workspace as its root", id)
	return 0
}

// TestSessionTenancy checks that one key cannot see or touch another's
// session, and that a missing key is refused.
func TestSessionTenancy(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)
	for _, c := range []struct{ method, path string }{
		{"GET", sessionPath(id)},
		{"DELETE", sessionPath(id)},
		{"POST", sessionPath(id, "/exec")},
		{"GET", sessionPath(id, "/files/list?path=.")},
	} {
		body := strings.NewReader(`{"command":["true"]}`)
		if code, b := srv.call(t, keyB, c.method, c.path, body, "application/json"); code != http.StatusNotFound {
			t.Errorf("key B: %s %s = %d %s, want 404", c.method, c.path, code, b)
		}
	}
	var list struct {
		Sessions []session `json:"sessions"`
	}
	srv.jsonCall(t, keyB, "GET", "/v1/sessions", nil, http.StatusOK, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("key B lists %v, want none", list.Sessions)
	}
	if code, _ := srv.call(t, "", "GET", "/v1/sessions", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("no key: GET /v1/sessions = %d, want 401", code)
	}
	if code, _ := srv.call(t, "wrong", "GET", "/v1/sessions", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("wrong key: GET /v1/sessions = %d, want 401", code)
	}
	srv.jsonCall(t, keyA, "DELETE", sessionPath(id), nil, http.StatusNoContent, nil)
	srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusNotFound, nil)
}

// TestSessionExpiry checks that TTL and idle expiry reap sessions and leave
// no cgroup of theirs behind.
func TestSessionExpiry(t *testing.T) {
	srv := startServer(t)
	ttl := srv.newSession(t, keyA, map[string]any{"ttl_seconds": 1})
	idle := srv.newSession(t, keyA, map[string]any{"idle_timeout_seconds": 1})
	if len(srv.cgroups(t)) == 0 {
		t.Fatal("the live sessions' cgroups are not where the leftover check looks")
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c1, _ := srv.call(t, keyA, "GET", sessionPath(ttl), nil, "")
		c2, _ := srv.call(t, keyA, "GET", sessionPath(idle), nil, "")
		if c1 == http.StatusNotFound && c2 == http.StatusNotFound {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range []string{ttl, idle} {
		if code, _ := srv.call(t, keyA, "GET", sessionPath(id), nil, ""); code != http.StatusNotFound {
			t.Errorf("session %s still answers %d after expiry, want 404", id, code)
		}
	}
	if left := srv.cgroups(t); len(left) > 0 {
		t.Errorf("cgroups left after expiry: %v", left)
	}
}

// TestSessionBadRequests sends malformed, oversized and out-of-bounds
// requests: each gets a one-line 4xx error and the server stays healthy.
func TestSessionBadRequests(t *testing.T) {
	srv := startServer(t, "--max-sessions", "2")
	id := srv.newSession(t, keyA, nil)
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"malformed JSON", "POST", "/v1/sessions", `{"limits":`, 400},
		{"unknown field", "POST", "/v1/sessions", `{"colour":"red"}`, 400},
		{"memory too small", "POST", "/v1/sessions", `{"limits":{"memory_bytes":1}}`, 400},
		{"negative ttl", "POST", "/v1/sessions", `{"ttl_seconds":-5}`, 400},
		{"bad id", "GET", "/v1/sessions/../../etc", ``, 404},
		{"malformed id", "GET", "/v1/sessions/ses_short", ``, 400},
		{"missing session", "GET", "/v1/sessions/ses_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ``, 404},
		{"command and code", "POST", sessionPath(id, "/exec"), `{"command":["true"],"language":"python","code":"1"}`, 400},
		{"nothing to run", "POST", sessionPath(id, "/exec"), `{}`, 400},
		{"unknown language", "POST", sessionPath(id, "/exec"), `{"language":"cobol","code":"1"}`, 400},
		{"oversized body", "POST", "/v1/sessions", `{"env":{"A":"` + strings.Repeat("x", 9<<20) + `"}}`, 413},
	}
	for _, tt := range tests {
		code, b := srv.call(t, keyA, tt.method, tt.path, strings.NewReader(tt.body), "application/json")
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if code != tt.want || (code != 404 && (e.Error.Message == "" || strings.Contains(e.Error.Message, "\n"))) {
			t.Errorf("%s: %s %s = %d %s, want %d with a one-line message", tt.name, tt.method, tt.path, code, b, tt.want)
		}
		srv.healthy(t)
	}
	srv.newSession(t, keyB, nil)
	if code, b := srv.call(t, keyA, "POST", "/v1/sessions", strings.NewReader(`{}`), "application/json"); code != http.StatusTooManyRequests {
		t.Errorf("third session with --max-sessions 2 = %d %s, want 429", code, b)
	}
}

// TestSessionStream checks the NDJSON stream: output events as they come,
// then exactly one result event, last.
func TestSessionStream(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)
	body := `{"command":["sh","-c","echo one; echo two >&2; sleep 0.2; echo three"]}`
	code, b := srv.call(t, keyA, "POST", sessionPath(id, "/exec/stream"), strings.NewReader(body), "application/json")
	if code != http.StatusOK {
		t.Fatalf("stream = %d %s, want 200", code, b)
	}
	stdout, stderr, r := streamEvents(t, b)
	if r.Stdout != "one\nthree\n" {
		t.Errorf("result event = %+v, want the whole stdout", r)
	}
	if stdout != "one\nthree\n" || stderr != "two\n" {
		t.Errorf("streamed stdout %q stderr %q, want one/three and two", stdout, stderr)
	}
}

// TestSessionUploadLimits checks that an upload meets the session's own
// limits: its largest file and its disk, each a 413 leaving nothing behind.
func TestSessionUploadLimits(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, map[string]any{"limits": map[string]any{"disk_bytes": 2 << 20, "file_size_bytes": 1 << 20}})
	put := func(name string, size int) (int, []byte) {
		return srv.call(t, keyA, "PUT", sessionPath(id, "/files?path="+name), bytes.NewReader(make([]byte, size)), "application/octet-stream")
	}
	if code, b := put("big", 1<<20+1); code != http.StatusRequestEntityTooLarge {
		t.Errorf("upload over file_size_bytes = %d %s, want 413", code, b)
	}
	if code, b := put("a", 1<<20-4096); code != http.StatusCreated {
		t.Fatalf("upload under the limits = %d %s, want 201", code, b)
	}
	if code, b := put("b", 1<<20-4096); code != http.StatusCreated {
		t.Fatalf("second upload = %d %s, want 201", code, b)
	}
	if code, b := put("c", 1<<20-4096); code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "disk_bytes") {
		t.Errorf("upload past disk_bytes = %d %s, want 413 naming disk_bytes", code, b)
	}
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"ls", "-A"}}, http.StatusOK, &r)
	if r.Stdout != "a\nb\n" {
		t.Errorf("workspace after the refusals = %q, want only a and b", r.Stdout)
	}
}

// TestSessionDeletedDuringExec checks that an exec cut short by its
// session's deletion says so (404), not that Warden failed (500).
func TestSessionDeletedDuringExec(t *testing.T) {
	srv := startServer(t)
	id := srv.newSession(t, keyA, nil)
	type answer struct {
		code int
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		code, b := srv.call(t, keyA, "POST", sessionPath(id, "/exec"), strings.NewReader(`{"command":["sleep","30"]}`), "application/json")
		done <- answer{code, b}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var s session
		srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, &s)
		if s.State == "busy" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.jsonCall(t, keyA, "DELETE", sessionPath(id), nil, http.StatusNoContent, nil)
	select {
	case a := <-done:
		if a.code != http.StatusNotFound || !strings.Contains(string(a.body), "ended during the exec") {
			t.Errorf("exec of a deleted session = %d %s, want 404 saying it ended", a.code, a.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the exec did not end when its session was deleted")
	}
}

// cgroups lists the server's sandbox cgroups: it shares this test's
// cgroups, so they live under the same parents, named after its pid.
func (s *apiServer) cgroups(t *testing.T) []string {
	t.Helper()
	parents := cgroup.Parents()
	if len(parents) == 0 {
		t.Fatal("no cgroup parents found to look for sandbox cgroups in")
	}
	var all []string
	for _, p := range parents {
		found, _ := filepath.Glob(filepath.Join(p, strconv.Itoa(s.pid)+"-*"))
		all = append(all, found...)
	}
	return all
}
