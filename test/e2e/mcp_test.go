package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPStdio drives `warden mcp` as an MCP client does: it starts the
// binary and speaks the protocol over its stdin and stdout.
func TestMCPStdio(t *testing.T) {
	requireSandbox(t)
	cmd := exec.Command(wardenBin, "mcp", "--timeout", "20s")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs := mcpConnect(t, &mcp.CommandTransport{Command: cmd})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("warden mcp stderr:\n%s", stderr.String())
		}
	})

	checkTools(t, cs)
	id := notebook(t, cs)
	malformed(t, cs, id)

	// A session left open dies with the client.
	other := mcpSessionID(t, mcpCall(t, cs, "create_session", nil))
	inits := childInits(t, cmd.Process.Pid)
	if len(inits) != 2 {
		t.Fatalf("warden mcp has %d sandbox inits (%v) for sessions %s and %s, want 2", len(inits), inits, id, other)
	}
	if err := cs.Close(); err != nil {
		t.Logf("closing the client: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range inits {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox init %d still runs 30s after the client disconnected", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("warden mcp ended with %v, want exit 0 when its client disconnects", cmd.ProcessState)
	}
}

// TestMCPHTTP drives /mcp on `warden serve` with an API key: the same
// tools, sessions owned by the key's tenant, no entry without a key.
func TestMCPHTTP(t *testing.T) {
	srv := startServer(t)
	cs := mcpConnect(t, &mcp.StreamableClientTransport{
		Endpoint:   srv.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{keyA}},
		MaxRetries: -1,
	})
	checkTools(t, cs)
	id := notebook(t, cs)
	malformed(t, cs, id)

	// The session is keyA's, as if made through the HTTP API.
	srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusOK, nil)
	srv.jsonCall(t, keyB, "GET", sessionPath(id), nil, http.StatusNotFound, nil)
	other := mcpConnect(t, &mcp.StreamableClientTransport{
		Endpoint: srv.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{keyB}}, MaxRetries: -1,
	})
	if res := mcpCall(t, other, "run_command", map[string]any{"argv": []string{"true"}, "session_id": id}); !res.IsError || !strings.Contains(mcpText(t, res), "session not found") {
		t.Errorf("key B using key A's session = error %v, %q; want session not found", res.IsError, mcpText(t, res))
	}
	if code, b := srv.call(t, "", "POST", "/mcp", strings.NewReader(`{}`), "application/json"); code != http.StatusUnauthorized {
		t.Errorf("POST /mcp without a key = %d %s, want 401", code, b)
	}
	res := mcpCall(t, cs, "close_session", map[string]any{"session_id": id})
	if res.IsError {
		t.Fatalf("close_session: %s", mcpText(t, res))
	}
	srv.jsonCall(t, keyA, "GET", sessionPath(id), nil, http.StatusNotFound, nil)
	srv.healthy(t)
}

// bearer adds an API key to every request, as an MCP client configured
// with an Authorization header does.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpConnect(t *testing.T, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connecting to the MCP server: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// checkTools checks the tool list: every tool a model needs, each with a
// description and an object schema.
func checkTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("listing tools: %v", err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		schema, _ := tool.InputSchema.(map[string]any)
		if tool.Description == "" || schema["type"] != "object" || schema["properties"] == nil {
			t.Errorf("tool %s: description %q, schema %v; want both", tool.Name, tool.Description, schema)
		}
	}
	slices.Sort(names)
	want := []string{"close_session", "create_session", "list_files", "list_templates", "read_file", "run_code", "run_command", "write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

// notebook runs the steps of a model's analysis in one session: state
// across calls, a chart, a file, a timeout that keeps the session. It
// returns the session's id, still open.
func notebook(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	id := mcpSessionID(t, mcpCall(t, cs, "create_session", nil))
	code := func(src string, extra map[string]any) *mcp.CallToolResult {
		args := map[string]any{"language": "python", "code": src, "session_id": id}
		for k, v := range extra {
			args[k] = v
		}
		return mcpCall(t, cs, "run_code", args)
	}
	if res := code("import math\nx = 41", nil); res.IsError {
		t.Fatalf("x = 41: %s", mcpText(t, res))
	}
	if res := code("x + 1", nil); res.IsError || !strings.Contains(mcpText(t, res), "42") {
		t.Errorf("x + 1 = %q, want 42: variables must persist", mcpText(t, res))
	}
	res := code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.savefig('/workspace/chart.png')", nil)
	var images int
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok && img.MIMEType == "image/png" && bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) {
			images++
		}
	}
	if res.IsError || images != 1 {
		t.Errorf("chart = error %v, %q, %d PNG images; want one", res.IsError, mcpText(t, res), images)
	}
	if res := mcpCall(t, cs, "list_files", map[string]any{"session_id": id}); !strings.Contains(mcpText(t, res), "chart.png") {
		t.Errorf("list_files = %q, want chart.png", mcpText(t, res))
	}
	res = code("while True: pass", map[string]any{"timeout_seconds": 1})
	if !res.IsError || !strings.HasPrefix(mcpText(t, res), "timed out after 1s; the session and its files are kept") {
		t.Errorf("endless loop = error %v, %q; want a timeout that keeps the session", res.IsError, mcpText(t, res))
	}
	res = mcpCall(t, cs, "run_command", map[string]any{"shell": "ls /workspace | grep -c chart", "session_id": id})
	if res.IsError || !strings.Contains(mcpText(t, res), "1") {
		t.Errorf("after the timeout: %q, want the session and its files", mcpText(t, res))
	}
	return id
}

// malformed sends bad arguments: each is a tool error naming the
// problem, and the server answers the next call.
func malformed(t *testing.T, cs *mcp.ClientSession, id string) {
	t.Helper()
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_code", map[string]any{"language": "python", "code": 1, "session_id": id}, "argument code"},
		{"run_code", map[string]any{"language": "cobol", "code": "x"}, "argument language"},
		{"read_file", map[string]any{"path": "chart.png"}, "session_id"},
		{"run_command", map[string]any{"argv": []string{"true"}, "session_id": "ses_missing"}, "session not found"},
	} {
		res := mcpCall(t, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(mcpText(t, res), c.want) {
			t.Errorf("%s(%v) = error %v, %q; want an error naming %q", c.tool, c.args, res.IsError, mcpText(t, res), c.want)
		}
	}
	if res := mcpCall(t, cs, "run_code", map[string]any{"language": "bash", "code": "echo still up", "session_id": id}); res.IsError || !strings.Contains(mcpText(t, res), "still up") {
		t.Errorf("after malformed calls: %q", mcpText(t, res))
	}
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func mcpText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("tool result without content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func mcpSessionID(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var out struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(b, &out); res.IsError || err != nil || !strings.HasPrefix(out.SessionID, "ses_") {
		t.Fatalf("create_session = %q, structured %s", mcpText(t, res), b)
	}
	return out.SessionID
}

// childInits lists the sandbox inits a warden process started: its own
// children named warden-init, or those of its spawner (warden-spawner).
func childInits(t *testing.T, parent int) []int {
	t.Helper()
	var pids []int
	for _, c := range children(t, parent) {
		switch c.arg0 {
		case "warden-init":
			pids = append(pids, c.pid)
		case "warden-spawner":
			for _, g := range children(t, c.pid) {
				if g.arg0 == "warden-init" {
					pids = append(pids, g.pid)
				}
			}
		}
	}
	return pids
}

type proc struct {
	pid  int
	arg0 string
}

// children lists parent's child processes with their argv[0].
func children(t *testing.T, parent int) []proc {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []proc
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ")".
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		dir := filepath.Dir(p)
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		arg0, _, _ := bytes.Cut(cmdline, []byte{0})
		pid, _ := strconv.Atoi(filepath.Base(dir))
		out = append(out, proc{pid: pid, arg0: string(arg0)})
	}
	return out
}
