package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestSessionStreamOutputLimit floods both streams far past output_bytes
// from a command and from each interpreter: the program must complete,
// and the stream must carry exactly what the Result keeps (the first
// output_bytes of each) with the truncation flags set.
func TestSessionStreamOutputLimit(t *testing.T) {
	const limit = 1000
	// 32 MiB on stdout, 3000 bytes on stderr, then a line after both.
	flood := "head -c 33554432 /dev/zero | tr '\\0' y; head -c 3000 /dev/zero | tr '\\0' e >&2; echo end"
	tests := []struct {
		name string
		body map[string]any
	}{
		{"command", map[string]any{"command": []string{"sh", "-c", flood}}},
		{"python", map[string]any{"language": "python", "code": "import os\nos.system(" + jsonQuote(flood) + ")"}},
		{"bash", map[string]any{"language": "bash", "code": flood}},
		{"javascript", map[string]any{"language": "javascript", "code": "require('child_process').execSync(" + jsonQuote(flood) + ", {stdio: 'inherit'})"}},
	}
	srv := startServer(t)
	id := srv.newSession(t, keyA, map[string]any{"limits": map[string]any{"output_bytes": limit}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.body["timeout_seconds"] = 120
			body, _ := json.Marshal(tt.body)
			code, b := srv.call(t, keyA, "POST", sessionPath(id, "/exec/stream"), strings.NewReader(string(body)), "application/json")
			if code != http.StatusOK {
				t.Fatalf("stream = %d %s, want 200", code, b)
			}
			stdout, stderr, r := streamEvents(t, b)
			if r.TimedOut || r.ExitCode != 0 {
				t.Fatalf("the flood did not complete: timed out %v, exit %d, stderr %q", r.TimedOut, r.ExitCode, r.Stderr)
			}
			want := map[string][2]string{
				"stdout": {strings.Repeat("y", limit), r.Stdout},
				"stderr": {strings.Repeat("e", limit), r.Stderr},
			}
			streamed := map[string]string{"stdout": stdout, "stderr": stderr}
			for name, w := range want {
				if streamed[name] != w[0] || w[1] != w[0] {
					t.Errorf("%s: streamed %d bytes, Result kept %d; want exactly the first %d, the same in both", name, len(streamed[name]), len(w[1]), limit)
				}
			}
			if !r.StdoutTruncated || !r.StderrTruncated {
				t.Errorf("stdout_truncated %v stderr_truncated %v, want both true", r.StdoutTruncated, r.StderrTruncated)
			}
		})
	}
}

// jsonQuote quotes s as a string literal of Python and JavaScript alike.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// streamEvents splits an NDJSON exec stream into its streamed stdout and
// stderr and its final Result.
func streamEvents(t *testing.T, b []byte) (string, string, spec.Result) {
	t.Helper()
	var stdout, stderr strings.Builder
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, line := range lines {
		var e struct {
			Type   string       `json:"type"`
			Data   string       `json:"data"`
			Result *spec.Result `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		switch {
		case e.Type == "stdout":
			stdout.WriteString(e.Data)
		case e.Type == "stderr":
			stderr.WriteString(e.Data)
		case e.Type == "result" && i == len(lines)-1 && e.Result != nil:
			return stdout.String(), stderr.String(), *e.Result
		default:
			t.Fatalf("line %d: unexpected event %.200q", i, line)
		}
	}
	t.Fatal("the stream has no result event")
	return "", "", spec.Result{}
}
