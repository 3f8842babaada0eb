package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake")

// TestMCPListTools: every tool is listed with a description a model can use
// and an object input schema whose properties are all described.
func TestMCPListTools(t *testing.T) {
	list := listTools(t)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 80 {
			t.Errorf("%s: description %q is too short to guide a model", tool.Name, tool.Description)
		}
		schema, _ := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		if schema["type"] != "object" || len(props) == 0 {
			t.Errorf("%s: input schema %v, want an object with properties", tool.Name, schema)
		}
		for name, p := range props {
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s: property %s has no description", tool.Name, name)
			}
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"close_session", "create_session", "list_files", "list_templates", "read_file", "run_code", "run_command", "write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

// TestMCPRunCodeResult: a Result becomes a text summary, one image content
// per PNG, structured output, and isError exactly when something failed.
func TestMCPRunCodeResult(t *testing.T) {
	f := newFake(t)
	cs, _ := connect(t, f, Options{Owner: "mcp"})
	f.exec = func(sandbox.ExecRequest) spec.Result {
		return spec.Result{Stdout: "drawn\n", Value: "42", Outputs: []spec.Output{
			{MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(pngBytes), Encoding: "base64"},
			{MimeType: "text/html", Data: "<b>table</b>", Encoding: "utf-8"},
		}}
	}
	res := call(t, cs, "run_code", map[string]any{"language": "python", "code": "plot()"})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("run_code = error %v, %d contents; want success with text and one image", res.IsError, len(res.Content))
	}
	for _, want := range []string{"ok", "drawn", "42", "<b>table</b>", "1 image(s) attached"} {
		if !strings.Contains(text(t, res), want) {
			t.Errorf("text %q does not contain %q", text(t, res), want)
		}
	}
	img, ok := res.Content[1].(*sdk.ImageContent)
	if !ok || img.MIMEType != "image/png" || !bytes.Equal(img.Data, pngBytes) {
		t.Errorf("second content = %#v, want the PNG", res.Content[1])
	}
	var out runOut
	remarshal(t, res.StructuredContent, &out)
	if out.Value != "42" || len(out.Outputs) != 2 || out.Outputs[0].Bytes != len(pngBytes) || out.SessionID != "" {
		t.Errorf("structured = %+v", out)
	}
	if ids := f.owned("mcp"); len(ids) != 0 {
		t.Errorf("one-off run_code left sessions %v", ids)
	}

	f.exec = func(sandbox.ExecRequest) spec.Result {
		return spec.Result{Exception: &spec.Exception{Type: "ZeroDivisionError", Message: "division by zero", Traceback: "Traceback...\nZeroDivisionError"}}
	}
	res = call(t, cs, "run_code", map[string]any{"language": "python", "code": "1/0"})
	if !res.IsError || !strings.HasPrefix(text(t, res), "raised ZeroDivisionError: division by zero") {
		t.Errorf("exception = error %v, text %q", res.IsError, text(t, res))
	}
	f.exec = func(sandbox.ExecRequest) spec.Result {
		return spec.Result{Stdout: strings.Repeat("x", 100<<10), ExitCode: 3}
	}
	res = call(t, cs, "run_command", map[string]any{"shell": "yes x | head -c 100000; exit 3"})
	if got := text(t, res); !res.IsError || !strings.HasPrefix(got, "exited with status 3") || len(got) > 20<<10 || !strings.Contains(got, "bytes cut") {
		t.Errorf("long failing command = error %v, %d bytes of text starting %.40q; want a cut error", res.IsError, len(got), got)
	}
	if !slices.Equal(f.last.Command, []string{"sh", "-c", "yes x | head -c 100000; exit 3"}) {
		t.Errorf("shell ran as %q", f.last.Command)
	}
}

// TestMCPTimeoutReason: a timeout is an error that says how long, and what
// survived it.
func TestMCPTimeoutReason(t *testing.T) {
	f := newFake(t)
	cs, _ := connect(t, f, Options{Owner: "mcp"})
	id := sessionID(t, call(t, cs, "create_session", nil))
	f.exec = func(sandbox.ExecRequest) spec.Result {
		return spec.Result{TimedOut: true, ExitCode: 137, Signal: "SIGKILL", InterpreterRestarted: true, WallTimeMS: 2000}
	}
	res := call(t, cs, "run_code", map[string]any{"language": "python", "code": "while True: pass", "session_id": id, "timeout_seconds": 2})
	want := "timed out after 2s; the session and its files are kept, but the python interpreter was restarted and its variables are gone"
	if !res.IsError || !strings.HasPrefix(text(t, res), want) {
		t.Errorf("timeout = error %v, text %q; want it to start %q", res.IsError, text(t, res), want)
	}
	if f.last.Timeout != 2*time.Second {
		t.Errorf("exec timeout = %v, want 2s", f.last.Timeout)
	}
}

// TestMCPMalformedArguments: bad arguments are tool errors that name the
// problem, and the server keeps serving.
func TestMCPMalformedArguments(t *testing.T) {
	cs, _ := connect(t, newFake(t), Options{Owner: "mcp"})
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_code", map[string]any{"language": "python", "code": 5}, "code"},
		{"run_code", map[string]any{"language": "ruby", "code": "puts 1"}, "language"},
		{"run_code", map[string]any{"code": "print(1)"}, "language"},
		{"run_code", map[string]any{"language": "python", "code": "1", "timeout_seconds": 100000}, "timeout_seconds"},
		{"run_code", map[string]any{"language": "python", "code": "1", "extra": true}, "extra"},
		{"run_code", map[string]any{"language": "python", "code": "1", "session_id": "ses_nope"}, "create_session"},
		{"run_command", map[string]any{}, "give argv"},
		{"run_command", map[string]any{"argv": []string{"ls"}, "shell": "ls"}, "not both"},
		{"read_file", map[string]any{"path": "x"}, "session_id"},
		{"write_file", map[string]any{"session_id": "ses_nope", "path": "x", "content": "y"}, "session not found"},
		{"create_session", map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"pypi.org"}}}, "disabled"},
	} {
		res := call(t, cs, c.tool, c.args)
		t.Logf("%s(%v): %s", c.tool, c.args, text(t, res))
		if !res.IsError || !strings.Contains(text(t, res), c.want) {
			t.Errorf("%s(%v) = error %v, %q; want an error mentioning %q", c.tool, c.args, res.IsError, text(t, res), c.want)
		}
	}
	if res := call(t, cs, "run_command", map[string]any{"argv": []string{"true"}}); res.IsError {
		t.Errorf("after the bad calls: %q", text(t, res))
	}
}

// TestMCPFiles writes, lists and reads text, binary and image files.
func TestMCPFiles(t *testing.T) {
	cs, _ := connect(t, newFake(t), Options{Owner: "mcp"})
	id := sessionID(t, call(t, cs, "create_session", nil))
	for path, args := range map[string]map[string]any{
		"notes/a.txt": {"content": "héllo\n"},
		"bin.dat":     {"content_base64": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})},
		"chart.png":   {"content_base64": base64.StdEncoding.EncodeToString(pngBytes)},
	} {
		args["session_id"], args["path"] = id, path
		if res := call(t, cs, "write_file", args); res.IsError {
			t.Fatalf("write_file %s: %s", path, text(t, res))
		}
	}
	res := call(t, cs, "list_files", map[string]any{"session_id": id})
	if got := text(t, res); res.IsError || !strings.Contains(got, "notes/") || !strings.Contains(got, "chart.png") {
		t.Errorf("list_files = %q", got)
	}
	if res := call(t, cs, "read_file", map[string]any{"session_id": id, "path": "/workspace/notes/a.txt"}); text(t, res) != "héllo\n" {
		t.Errorf("read_file text = %q", text(t, res))
	}
	var out readOut
	remarshal(t, call(t, cs, "read_file", map[string]any{"session_id": id, "path": "bin.dat"}).StructuredContent, &out)
	if out.Encoding != "base64" || out.Content != "AAEC/w==" {
		t.Errorf("read_file binary = %+v", out)
	}
	res = call(t, cs, "read_file", map[string]any{"session_id": id, "path": "chart.png"})
	if img, ok := res.Content[len(res.Content)-1].(*sdk.ImageContent); !ok || img.MIMEType != "image/png" {
		t.Errorf("read_file png = %#v, want image content", res.Content)
	}
	if res := call(t, cs, "read_file", map[string]any{"session_id": id, "path": "../etc/passwd"}); !res.IsError {
		t.Errorf("read_file outside the workspace = %q, want an error", text(t, res))
	}
}

// TestMCPDisconnectDeletesSessions: when a stdio-style client goes, Run
// deletes the sessions it created and left open.
func TestMCPDisconnectDeletesSessions(t *testing.T) {
	f := newFake(t)
	cs, done := connect(t, f, Options{Owner: "mcp"})
	kept := sessionID(t, call(t, cs, "create_session", nil))
	closed := sessionID(t, call(t, cs, "create_session", nil))
	if res := call(t, cs, "close_session", map[string]any{"session_id": closed}); res.IsError {
		t.Fatalf("close_session: %s", text(t, res))
	}
	if ids := f.owned("mcp"); !slices.Equal(ids, []string{kept}) {
		t.Fatalf("sessions before disconnect = %v, want [%s]", ids, kept)
	}
	cs.Close()
	select {
	case <-done: //nolint:errcheck // a wait for the goroutine to end: its result is not what this test checks
	case <-time.After(testTimeout):
		t.Fatal("Run did not return after the client disconnected")
	}
	if ids := f.owned("mcp"); len(ids) != 0 {
		t.Errorf("sessions after disconnect = %v, want none", ids)
	}
}

func sessionID(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	var out sessionOut
	remarshal(t, res.StructuredContent, &out)
	if res.IsError || !strings.HasPrefix(out.SessionID, "ses_") {
		t.Fatalf("create_session = %q, structured %+v", text(t, res), out)
	}
	return out.SessionID
}

// remarshal decodes structured content (a map on the client side) into v.
func remarshal(t *testing.T, from, v any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// TestMCPDeadSession: an exec in a session whose sandbox died is an error
// that says so, and offers its files only when the Manager kept them
// (warden mcp keeps none).
func TestMCPDeadSession(t *testing.T) {
	f := newFake(t)
	cs, _ := connect(t, f, Options{Owner: "mcp"})
	id := sessionID(t, call(t, cs, "create_session", nil))
	f.execErr = &sandbox.DeadError{ID: id, At: time.Now(), Reason: "its sandbox ended unexpectedly: its init ended (signal: killed)"}
	res := call(t, cs, "run_code", map[string]any{"session_id": id, "language": "python", "code": "1"})
	got := text(t, res)
	if !res.IsError || !strings.Contains(got, "session is dead") || !strings.Contains(got, "signal: killed") || !strings.Contains(got, "create_session") {
		t.Errorf("run_code in a dead session = error %v, %q; want an error naming the death and create_session", res.IsError, got)
	}
	if strings.Contains(got, "read_file") || strings.Contains(got, "can still be read") {
		t.Errorf("run_code in a dead session without kept files = %q; want no offer of its files", got)
	}
}

func TestWardenErrorHints(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&sandbox.DeadError{ID: "ses_x", Reason: "its sandbox ended unexpectedly", FilesKept: true}, "read_file"},
		{&sandbox.DeadError{ID: "ses_x", Reason: "its sandbox ended unexpectedly"}, "its files included"},
		{fmt.Errorf("%w: session ses_x died", sandbox.ErrDead), "its files included"},
		{fmt.Errorf("%w: no session", sandbox.ErrNotFound), "create_session"},
		{fmt.Errorf("%w: busy", sandbox.ErrBusy), "one call at a time"},
		{&sandbox.StartPacedError{Rate: 5, Burst: 100, Wait: time.Second}, "keep using the sessions you have"},
		{fmt.Errorf("exec: %w (31 of 32 channels in use, 4 more wanted)", sandbox.ErrNoChannel), "close_session it"},
	}
	for _, tt := range tests {
		if got := wardenError("running", tt.err).Error(); !strings.Contains(got, tt.want) {
			t.Errorf("wardenError(%v) = %q, want a hint containing %q", tt.err, got, tt.want)
		}
	}
}

// TestMCPSchemaBoundsAreTheManagers: the schemas offer no more than the
// Manager allows: its timeout ceiling, ttl and idle caps.
func TestMCPSchemaBoundsAreTheManagers(t *testing.T) {
	list := listTools(t)
	want := map[string]map[string]float64{
		"create_session": {"ttl_seconds": sandbox.DefaultMaxTTL.Seconds(), "idle_timeout_seconds": sandbox.DefaultMaxIdle.Seconds()},
		"run_code":       {"timeout_seconds": 600},
		"run_command":    {"timeout_seconds": 600},
	}
	for _, tool := range list.Tools {
		props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		for name, most := range want[tool.Name] {
			p, _ := props[name].(map[string]any)
			if got, _ := p["maximum"].(float64); got != most {
				t.Errorf("%s.%s: maximum %v, want %v", tool.Name, name, p["maximum"], most)
			}
		}
	}
}
