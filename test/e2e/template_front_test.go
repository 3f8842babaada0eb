package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestServeTemplates: warden serve serves its state directory's store:
// GET /v1/templates lists it after host, a session and a run on a
// template run the image's programs, an unknown name is a one-line 400,
// and warden template commit stores a live session's home and /workspace
// as a template whose sessions start with them (and may change them).
func TestServeTemplates(t *testing.T) {
	state := minimalTemplate(t)
	srv := startServer(t, "--state-dir", state)
	var list struct {
		Templates []struct {
			Name      string   `json:"name"`
			Languages []string `json:"languages"`
		} `json:"templates"`
	}
	srv.jsonCall(t, keyB, "GET", "/v1/templates", nil, http.StatusOK, &list)
	if len(list.Templates) != 2 || list.Templates[0].Name != "host" || list.Templates[1].Name != "minimal" {
		t.Fatalf("GET /v1/templates = %+v, want host and minimal", list.Templates)
	}

	code, b := srv.call(t, keyA, "POST", "/v1/sessions", jsonBody(t, map[string]any{"template": "nope"}), "application/json")
	if code != http.StatusBadRequest || !strings.Contains(string(b), `nope`) {
		t.Errorf("a session on an unknown template: %d %s, want a 400 naming it", code, b)
	}
	var run spec.Result
	srv.jsonCall(t, keyA, "POST", "/v1/run", map[string]any{"template": "minimal", "command": []string{"sh", "-c", "test -x /usr/bin/python3.11 && echo image"}}, http.StatusOK, &run)
	if run.Stdout != "image\n" {
		t.Errorf("a run on minimal: got %+v, want the image's python", run)
	}

	id := srv.newSession(t, keyA, map[string]any{"template": "minimal"})
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c", "echo kept > ~/note && mkdir -p /workspace/data && echo 1,2 > /workspace/data/in.csv && echo gone > /tmp/t"}}, http.StatusOK, &r)
	if r.ExitCode != 0 {
		t.Fatalf("writing in the session: %+v", r)
	}
	inv := warden(t, "", "template", "commit", "--state-dir", state, id, "minimal-note")
	if inv.code != 0 {
		t.Fatalf("warden template commit: exit %d, %s", inv.code, inv.stderr)
	}
	if want := "visible to every tenant"; !strings.Contains(inv.stderr, want) {
		t.Errorf("warden template commit's stderr: got %q, want a warning containing %q", inv.stderr, want)
	}
	if inv := warden(t, "", "template", "commit", "--state-dir", state, "ses_nosuchsession0000000000", "x"); inv.code == 0 || !strings.Contains(inv.stderr, "no record") {
		t.Errorf("commit of a missing session: exit %d %q, want a one-line refusal", inv.code, inv.stderr)
	}

	next := srv.newSession(t, keyB, map[string]any{"template": "minimal-note"})
	srv.jsonCall(t, keyB, "POST", sessionPath(next, "/exec"), map[string]any{"command": []string{"sh", "-c", "cat ~/note /workspace/data/in.csv; test -e /tmp/t || echo no-tmp; echo more >> ~/note && echo writable"}}, http.StatusOK, &r)
	if want := "kept\n1,2\nno-tmp\nwritable\n"; r.Stdout != want {
		t.Errorf("a session on the committed template: got %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
	}
}
