package e2e

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// TestSeededTemplate: a committed template's home and /workspace start
// every sandbox on it, whichever front end made it: warden run, a serve
// session (seeded on the host, into its persistent workspace), a serve
// one-shot run and warden mcp (seeded by the init), each readable and
// writable.
func TestSeededTemplate(t *testing.T) {
	state := minimalTemplate(t)
	st, err := template.Open(filepath.Join(state, "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	templatetest.CommitSeeded(t, st, "minimal", "seeded")
	want := templatetest.SeededWant

	t.Run("run", func(t *testing.T) {
		if r := sh(t, templatetest.SeededScript, "--state-dir", state, "--template", "seeded"); r.ExitCode != 0 || r.Stdout != want {
			t.Errorf("warden run: got stdout %q (exit %d, stderr %q), want %q", r.Stdout, r.ExitCode, r.Stderr, want)
		}
	})
	t.Run("serve", func(t *testing.T) {
		srv := startServer(t, "--state-dir", state)
		id := srv.newSession(t, keyA, map[string]any{"template": "seeded"})
		var r spec.Result
		srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c", templatetest.SeededScript}}, http.StatusOK, &r)
		if r.Stdout != want {
			t.Errorf("a serve session: got %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
		}
		srv.jsonCall(t, keyA, "POST", "/v1/run", map[string]any{"template": "seeded", "command": []string{"sh", "-c", templatetest.SeededScript}}, http.StatusOK, &r)
		if r.Stdout != want {
			t.Errorf("a serve one-shot run: got %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
		}
	})
	t.Run("mcp", func(t *testing.T) {
		cmd := exec.Command(wardenBin, "mcp", "--state-dir", state, "--timeout", "20s")
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cs := mcpConnect(t, &mcp.CommandTransport{Command: cmd})
		id := mcpSessionID(t, mcpCall(t, cs, "create_session", map[string]any{"template": "seeded"}))
		res := mcpCall(t, cs, "run_command", map[string]any{"shell": templatetest.SeededScript, "session_id": id})
		if got := mcpText(t, res); res.IsError || !strings.Contains(got, "secret") || !strings.Contains(got, "removed") {
			t.Errorf("an mcp session: got error %v, %q (stderr %q), want the seeded files", res.IsError, got, stderr.String())
		}
	})
}
