package e2e

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestSessionStreamTransport runs what a session does over native's
// stream transport (--agent-transport stream), through the HTTP API:
// every interpreter (their fds 3 and 4 are channels too), a chart, stdin,
// the output limit and an OOM kill report, which must come out as they do
// over descriptors.
func TestSessionStreamTransport(t *testing.T) {
	requireSandbox(t)
	srv := startServer(t, backendArgs(nativeStream)...)
	id := srv.newSession(t, keyA, map[string]any{"limits": map[string]any{"output_bytes": 1024, "memory_bytes": 128 << 20}})
	srv.code(t, keyA, id, "python", "x = 41", nil)
	if r := srv.code(t, keyA, id, "python", "x + 1", nil); r.Value != "42" {
		t.Errorf("x + 1 = %q (stderr %q), want 42", r.Value, r.Stderr)
	}
	chart := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nprint('drawn')"
	r := srv.code(t, keyA, id, "python", chart, nil)
	if r.Stdout != "drawn\n" || len(r.Outputs) != 1 || r.Outputs[0].MimeType != "image/png" {
		t.Fatalf("chart cell = stdout %q, stderr %q, outputs %d; want one image/png", r.Stdout, r.Stderr, len(r.Outputs))
	}
	if png, err := base64.StdEncoding.DecodeString(r.Outputs[0].Data); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("chart = %d bytes (err %v), want a PNG", len(png), err)
	}
	if r := srv.code(t, keyA, id, "bash", "echo $((6 * 7))", nil); strings.TrimSpace(r.Stdout) != "42" {
		t.Errorf("bash cell = stdout %q, stderr %q; want 42", r.Stdout, r.Stderr)
	}
	if _, err := exec.LookPath("node"); err == nil {
		if r := srv.code(t, keyA, id, "javascript", "6 * 7", nil); r.Value != "42" {
			t.Errorf("javascript cell = value %q, stderr %q; want 42", r.Value, r.Stderr)
		}
	}
	run := func(body map[string]any) spec.Result {
		var r spec.Result
		srv.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/exec", body, http.StatusOK, &r)
		return r
	}
	if r := run(map[string]any{"command": []string{"cat"}, "stdin": "hello"}); r.Stdout != "hello" {
		t.Errorf("cat with stdin = %q, want hello", r.Stdout)
	}
	if r := run(map[string]any{"command": []string{"sh", "-c", "head -c 100000 /dev/zero"}}); !r.StdoutTruncated || len(r.Stdout) != 1024 {
		t.Errorf("flood = truncated %v, %d bytes; want true, 1024", r.StdoutTruncated, len(r.Stdout))
	}
	bomb := "b = []\nfor _ in range(512): b.append(bytearray(1 << 20))"
	if r := run(map[string]any{"command": []string{"python3", "-c", bomb}}); !r.OOMKilled || r.Signal != "SIGKILL" {
		t.Errorf("bomb = oom_killed %v, signal %q, stderr %q; want an OOM kill", r.OOMKilled, r.Signal, r.Stderr)
	}
	if r := run(map[string]any{"command": []string{"echo", "alive"}}); r.Stdout != "alive\n" {
		t.Errorf("after the OOM kill = %q, want the session alive", r.Stdout)
	}
}

// TestSessionStreamFiles: over native's stream transport the file API
// is served by the box's agent (the path a Pod's files take): upload,
// list, download, a link the box planted and a missing file answer as
// on the host's path, and a paused session resumes for a file call,
// since its frozen agent could not answer one.
func TestSessionStreamFiles(t *testing.T) {
	requireSandbox(t)
	srv := startServer(t, backendArgs(nativeStream)...)
	id := srv.newSession(t, keyA, nil)
	files := "/v1/sessions/" + id + "/files"
	if code, body := srv.call(t, keyA, http.MethodPut, files+"?path=d/in.txt", strings.NewReader("uploaded"), "application/octet-stream"); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("upload = %d %s", code, body)
	}
	var r spec.Result
	srv.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"sh", "-c", "cat d/in.txt && ln -s /etc/passwd d/link"}}, http.StatusOK, &r)
	if r.Stdout != "uploaded" {
		t.Errorf("the box read the upload as %q, want \"uploaded\"", r.Stdout)
	}
	var list struct {
		Entries []struct{ Name, Type string }
	}
	srv.jsonCall(t, keyA, http.MethodGet, files+"/list?path=d", nil, http.StatusOK, &list)
	if len(list.Entries) != 2 || list.Entries[0].Name != "in.txt" || list.Entries[1].Type != "symlink" {
		t.Errorf("listing = %+v, want in.txt and a symlink", list.Entries)
	}
	if code, body := srv.call(t, keyA, http.MethodGet, files+"?path=d/link", nil, ""); code == http.StatusOK {
		t.Errorf("download through the box's link = 200 %q, want it refused", body)
	}
	if code, _ := srv.call(t, keyA, http.MethodGet, files+"?path=missing", nil, ""); code != http.StatusNotFound {
		t.Errorf("download of a missing file = %d, want 404", code)
	}
	srv.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/pause", nil, http.StatusOK, nil)
	if code, body := srv.call(t, keyA, http.MethodGet, files+"?path=d/in.txt", nil, ""); code != http.StatusOK || string(body) != "uploaded" {
		t.Errorf("download from the paused session = %d %q, want 200 \"uploaded\"", code, body)
	}
	var info struct{ State string }
	srv.jsonCall(t, keyA, http.MethodGet, "/v1/sessions/"+id, nil, http.StatusOK, &info)
	if info.State != "ready" {
		t.Errorf("after a file call the paused session is %q, want ready (resumed)", info.State)
	}
}
