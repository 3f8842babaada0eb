package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// TestDatasci: a session on the datasci test image (python3 with numpy,
// pandas and matplotlib, which the host lacks) imports pandas and returns
// a chart through each front end that serves sessions on templates. The
// image is imported once per process (hundreds of MB) into the shared
// store, beside minimal, whose base layer it shares (sharedTemplates).
// templatetest.Image skips the test when the image cannot be built (fails
// it under WARDEN_CI=1).
func TestDatasci(t *testing.T) {
	state := sharedTemplates(t, "minimal", "datasci")
	t.Run("serve", func(t *testing.T) { testDatasciServe(t, state) })
	t.Run("mcp", func(t *testing.T) { testDatasciMCP(t, state) })
}

// testDatasciServe: through warden serve's API, a session on the datasci
// template imports pandas and returns a chart.
func testDatasciServe(t *testing.T, state string) {
	srv := startServer(t, "--state-dir", state)
	id := srv.newSession(t, keyA, map[string]any{"template": "datasci"})
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"),
		map[string]any{"language": "python", "code": templatetest.ChartCode, "timeout_seconds": 180}, http.StatusOK, &r)
	if r.ExitCode != 0 {
		t.Fatalf("the chart code: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	templatetest.CheckChartResult(t, r.Value, r.Exception, r.Outputs)
	srv.healthy(t)
}

// testDatasciMCP: through warden mcp on stdio, create_session on the
// datasci template and run_code import pandas and return a chart as PNG
// image content.
func testDatasciMCP(t *testing.T, state string) {
	cmd := exec.Command(wardenBin, "mcp", "--state-dir", state, "--timeout", "180s")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs := mcpConnect(t, &mcp.CommandTransport{Command: cmd})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("warden mcp stderr:\n%s", stderr.String())
		}
	})
	id := mcpSessionID(t, mcpCall(t, cs, "create_session", map[string]any{"template": "datasci"}))
	res := mcpCall(t, cs, "run_code", map[string]any{"language": "python", "code": templatetest.ChartCode, "session_id": id, "timeout_seconds": 180})
	if res.IsError {
		t.Fatalf("run_code: %s", mcpText(t, res))
	}
	var out struct {
		Value     string          `json:"value"`
		Exception *spec.Exception `json:"exception"`
	}
	b, _ := json.Marshal(res.StructuredContent) // a value the SDK decoded from JSON
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("run_code's structured result %s: %v", b, err)
	}
	var outputs []spec.Output
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok {
			outputs = append(outputs, spec.Output{MimeType: img.MIMEType, Data: base64.StdEncoding.EncodeToString(img.Data)})
		}
	}
	templatetest.CheckChartResult(t, out.Value, out.Exception, outputs)
}
