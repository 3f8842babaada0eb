package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestServeTemplates: warden serve serves its state directory's store:
// GET /v1/templates lists it after host, a session and a run on a
// template run the image's programs, an unknown name is a one-line 400,
// and warden template commit stores a live session's home and /workspace
// as a template whose sessions start with them (and may change them),
// usable by the session's tenant only unless the operator shares it.
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
	listed := make([]string, len(list.Templates))
	for i, x := range list.Templates {
		listed[i] = x.Name
	}
	if len(listed) < 2 || listed[0] != "host" || !slices.Contains(listed, "minimal") { // the shared store may hold more
		t.Fatalf("GET /v1/templates = %+v, want host first and minimal", list.Templates)
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
	note, shared := uniqueName("minimal-note"), uniqueName("minimal-shared") // the store is the process's
	unknown := hiddenProbe(t, srv, note)                                     // B's answers before the template exists
	inv := warden(t, "", "template", "commit", "--state-dir", state, id, note)
	if inv.code != 0 {
		t.Fatalf("warden template commit: exit %d, %s", inv.code, inv.stderr)
	}
	if want := "usable only by tenant " + tenantOf(keyA); !strings.Contains(inv.stderr, want) {
		t.Errorf("warden template commit's stderr: got %q, want %q", inv.stderr, want)
	}
	if got := hiddenProbe(t, srv, note); got != unknown {
		t.Errorf("key B on key A's committed template:\n got  %s\n want %s (a template that does not exist)", got, unknown)
	}
	own := srv.newSession(t, keyA, map[string]any{"template": note}) // 201: A's own commit
	srv.jsonCall(t, keyA, "POST", sessionPath(own, "/exec"), map[string]any{"command": []string{"cat", "/home/sandbox/note"}}, http.StatusOK, &r)
	if r.Stdout != "kept\n" {
		t.Errorf("key A's session on its own committed template: got %+v, want its note", r)
	}
	if inv := warden(t, "", "template", "commit", "--state-dir", state, "ses_nosuchsession0000000000", "x"); inv.code == 0 || !strings.Contains(inv.stderr, "no record") {
		t.Errorf("commit of a missing session: exit %d %q, want a one-line refusal", inv.code, inv.stderr)
	}

	if inv := warden(t, "", "template", "commit", "--state-dir", state, "--share-with", "all", id, shared); inv.code != 0 || !strings.Contains(inv.stderr, "every tenant") {
		t.Fatalf("warden template commit --share-with all: exit %d, %s", inv.code, inv.stderr)
	}
	ls := warden(t, "", "template", "ls", "--state-dir", state)
	for _, want := range []string{"SHARED WITH", note, tenantOf(keyA), shared} {
		if !strings.Contains(ls.stdout, want) {
			t.Errorf("warden template ls: got %q, want %q in it", ls.stdout, want)
		}
	}
	next := srv.newSession(t, keyB, map[string]any{"template": shared})
	srv.jsonCall(t, keyB, "POST", sessionPath(next, "/exec"), map[string]any{"command": []string{"sh", "-c", "cat ~/note /workspace/data/in.csv; test -e /tmp/t || echo no-tmp; echo more >> ~/note && echo writable"}}, http.StatusOK, &r)
	if want := "kept\n1,2\nno-tmp\nwritable\n"; r.Stdout != want {
		t.Errorf("a session on the committed template: got %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
	}
}

// hiddenProbe is what key B gets when it lists, starts a session on and
// runs on template name, through the API, /mcp and E2B's POST
// /v2/sandboxes templateID: a template B may not
// use must answer exactly as one that does not exist.
func hiddenProbe(t *testing.T, srv *apiServer, name string) string {
	t.Helper()
	_, list := srv.call(t, keyB, "GET", "/v1/templates", nil, "")
	create, created := srv.call(t, keyB, "POST", "/v1/sessions", jsonBody(t, map[string]any{"template": name}), "application/json")
	run, ran := srv.call(t, keyB, "POST", "/v1/run", jsonBody(t, map[string]any{"template": name, "command": []string{"true"}}), "application/json")
	if create != http.StatusBadRequest || run != http.StatusBadRequest {
		t.Errorf("key B on template %s: create %d %s, run %d %s; want two 400s", name, create, created, run, ran)
	}
	cs := mcpConnect(t, &mcp.StreamableClientTransport{
		Endpoint: srv.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{keyB}}, MaxRetries: -1,
	})
	listed := mcpText(t, mcpCall(t, cs, "list_templates", nil))
	if !strings.Contains(listed, "minimal (") {
		t.Errorf("key B's list_templates on /mcp = %q, want the store's minimal in it", listed)
	}
	res := mcpCall(t, cs, "create_session", map[string]any{"template": name})
	if !res.IsError {
		t.Errorf("key B's create_session on template %s: %s, want an error", name, mcpText(t, res))
	}
	e2b, e2bBody := srv.e2bCall(t, "POST", "/v2/sandboxes", http.Header{"X-API-Key": {keyB}, "Content-Type": {"application/json"}},
		strings.NewReader(fmt.Sprintf(`{"templateID":%q,"timeout":60}`, name)))
	if e2b != http.StatusNotFound || !strings.Contains(string(e2bBody), name+`\" not found`) {
		t.Errorf("key B's E2B create on template %s: %d %s, want a 404 naming it not found", name, e2b, e2bBody)
	}
	return fmt.Sprintf("list %s; create %d %s; run %d %s; mcp list %s; mcp create %s; e2b create %d %s",
		list, create, created, run, ran, listed, mcpText(t, res), e2b, e2bBody)
}

// tenantOf is the tenant id the server derives from key (the first 16
// hex digits of its SHA-256), the owner in its request log.
func tenantOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
