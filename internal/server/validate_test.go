package server

import (
	"net/http"
	"strings"
	"testing"
)

func TestValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	id := h.create(keyA)
	exec := "/v1/sessions/" + id + "/exec"
	tests := []struct {
		name        string
		method      string
		target      string
		body        string
		wantStatus  int
		wantMessage string
	}{
		{"malformed JSON", "POST", "/v1/sessions", `{"limits":`, 400,
			"request body is not valid JSON: it ends early"},
		{"not JSON at all", "POST", "/v1/sessions", `limits`, 400,
			"request body is not valid JSON: invalid character 'l' looking for beginning of value (at byte 1)"},
		{"trailing garbage", "POST", "/v1/sessions", `{} {}`, 400,
			"request body has more data after its JSON value at byte 2"},
		{"trailing brace", "POST", "/v1/sessions", `{}}`, 400,
			"request body has more data after its JSON value at byte 2"},
		{"unknown field", "POST", "/v1/sessions", `{"limit":{}}`, 400,
			`request body: property "limit" is unsupported`},
		{"unknown nested field", "POST", "/v1/sessions", `{"limits":{"memory":1}}`, 400,
			`limits: property "memory" is unsupported`},
		{"memory below its bound", "POST", "/v1/sessions", `{"limits":{"memory_bytes":1}}`, 400,
			"limits.memory_bytes: number must be at least 4194304"},
		{"wrong type", "POST", "/v1/sessions", `{"ttl_seconds":"long"}`, 400,
			"ttl_seconds: value must be a number"},
		{"bad enum", "POST", "/v1/sessions", `{"network":{"mode":"open"}}`, 400,
			`network.mode: value is not one of the allowed values ["none","proxy"]`},
		{"no body", "POST", "/v1/sessions", ``, 400,
			"request body: is required"},
		{"allow without proxy", "POST", "/v1/sessions", `{"network":{"allow":["pypi.org"]}}`, 400,
			"--allow and --deny need --net proxy; with --net none nothing is reachable"},
		{"cpu time not whole", "POST", "/v1/sessions", `{"limits":{"cpu_time_seconds":1.5}}`, 400,
			"cpu time 1.5s must be whole seconds (the kernel counts seconds)"},
		{"bad env name", "POST", "/v1/sessions", `{"env":{"1X":"y"}}`, 400,
			`env: name "1X" is not valid: use letters, digits and _, not starting with a digit`},
		{"oversized body", "POST", "/v1/sessions", `{"env":{"A":"` + strings.Repeat("x", 2000) + `"}}`, 413,
			"request body is larger than the 1KiB limit"},
		{"short id", "GET", "/v1/sessions/nope", ``, 400,
			"path parameter id: minimum string length is 26"},
		{"bad id", "GET", "/v1/sessions/ses_" + strings.Repeat("*", 22), ``, 400,
			`path parameter id: string doesn't match the regular expression "^ses_[A-Za-z0-9_-]{22,64}$"`},
		{"missing file path", "GET", "/v1/sessions/" + id + "/files", ``, 400,
			"query parameter path: value is required but missing"},
		{"bad mode", "PUT", "/v1/sessions/" + id + "/files?path=a&mode=999", ``, 400,
			`query parameter mode: string doesn't match the regular expression "^0?[0-7]{3}$"`},
		{"both exec forms", "POST", exec, `{"command":["ls"],"language":"python","code":"1"}`, 400,
			"give exactly one of command, or language with code"},
		{"neither exec form", "POST", exec, `{"cwd":"x"}`, 400,
			"give exactly one of command, or language with code"},
		{"language without code", "POST", exec, `{"language":"python"}`, 400,
			"language and code go together: give both"},
		{"stdin with code", "POST", exec, `{"language":"python","code":"1","stdin":"x"}`, 400,
			"stdin: only a command reads stdin; pass data to code in the code or a file"},
		{"empty command", "POST", exec, `{"command":[]}`, 400,
			"command: minimum number of items is 1"},
		{"exec timeout above bound", "POST", exec, `{"command":["ls"],"timeout_seconds":1e9}`, 400,
			"timeout_seconds: number must be at most 86400"},
		{"run with two forms", "POST", "/v1/run", `{"command":["ls"],"code":"1"}`, 400,
			"give exactly one of command, or language with code"},
		{"command item not a string", "POST", exec, `{"command":["ls",1]}`, 400,
			"command[1]: value must be a string"},
		{"empty allowed host", "POST", "/v1/sessions", `{"network":{"mode":"proxy","allow":[""]}}`, 400,
			"network.allow[0]: minimum string length is 1"},
		{"memory one above its int64 bound", "POST", "/v1/sessions", `{"limits":{"memory_bytes":68719476737}}`, 400,
			"limits.memory_bytes: number must be at most 68719476736"},
		{"integer beyond int64", "POST", "/v1/sessions", `{"limits":{"memory_bytes":1e30}}`, 400,
			"limits.memory_bytes: number must be at most 68719476736"},
		{"fractional pids", "POST", "/v1/sessions", `{"limits":{"pids":1.5}}`, 400,
			"limits.pids: value must be an integer"},
		{"cpus below a fractional bound", "POST", "/v1/sessions", `{"limits":{"cpus":0.009}}`, 400,
			"limits.cpus: number must be at least 0.01"},
		{"null limit", "POST", "/v1/sessions", `{"ttl_seconds":null}`, 400,
			"ttl_seconds: value must be a number, not null"},
		{"env value not a string", "POST", "/v1/sessions", `{"env":{"A":1}}`, 400,
			"env.A: value must be a string"},
		{"body not an object", "POST", "/v1/sessions", `[]`, 400,
			"request body: value must be an object"},
		{"bad boolean", "DELETE", "/v1/sessions/" + id + "/files?path=a&recursive=maybe", ``, 400,
			"query parameter recursive: value must be a boolean (true or false)"},
		{"empty query value", "GET", "/v1/sessions/" + id + "/files?path=", ``, 400,
			"query parameter path: minimum string length is 1"},
		{"repeated query value", "PUT", "/v1/sessions/" + id + "/files?path=a&mode=644&mode=999", ``, 400,
			`query parameter mode: string doesn't match the regular expression "^0?[0-7]{3}$"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.do(tt.method, tt.target, keyA, tt.body)
			code, msg := resp.errorMessage()
			if resp.status != tt.wantStatus || msg != tt.wantMessage {
				t.Errorf("got %d %q\nwant %d %q", resp.status, msg, tt.wantStatus, tt.wantMessage)
			}
			if strings.Contains(msg, "\n") || code == "" {
				t.Errorf("error is not one line with a code: %s", resp.body)
			}
			h.healthy()
		})
	}
}

func TestStrictDecodeBehindTheValidator(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		body, want string
	}{
		{`{"bogus":1}`, `request body: unknown field "bogus"`},
		{`{"ttl_seconds":"x"}`, "ttl_seconds: must be float64, not string"},
		{`{} x`, "request body has more data after its JSON value at byte 2"},
		{`{}]`, "request body has more data after its JSON value at byte 2"},
		{``, "request body: is required (send {} for the defaults)"},
	}
	for _, tt := range tests {
		req := newRequest("POST", "/v1/sessions", tt.body)
		rec := &recorder{ResponseWriter: newDiscard()}
		var body sessionCreateJSON
		err := h.srv.decode(rec, req, &body)
		if err == nil || err.Error() != tt.want {
			t.Errorf("decode(%q): got %v, want %q", tt.body, err, tt.want)
		}
	}
}

type discard struct{ h http.Header }

func newDiscard() *discard                     { return &discard{http.Header{}} }
func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

func TestMember(t *testing.T) {
	tests := []struct {
		field, key, want string
	}{
		{"", "limits", "limits"},
		{"limits", "memory_bytes", "limits.memory_bytes"},
		{"env", "HOME", "env.HOME"},
		{"env", "1X", `env["1X"]`},
		{"env", "A.B", `env["A.B"]`},
		{"env", "A\nB", `env["A\nB"]`},
		{"env", "", `env[""]`},
	}
	for _, tt := range tests {
		if got := member(tt.field, tt.key); got != tt.want {
			t.Errorf("member(%q, %q): got %q, want %q", tt.field, tt.key, got, tt.want)
		}
	}
}

func TestValidationContentType(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		contentType string
		wantStatus  int
		wantMessage string
	}{
		{"", http.StatusCreated, ""},
		{"application/json", http.StatusCreated, ""},
		{"Application/JSON; charset=utf-8", http.StatusCreated, ""},
		{"text/plain", http.StatusBadRequest,
			`request body: header Content-Type has unexpected value "text/plain"; send application/json`},
	}
	for _, tt := range tests {
		req := newRequest("POST", "/v1/sessions", "{}")
		req.Header.Del("Content-Type")
		if tt.contentType != "" {
			req.Header.Set("Content-Type", tt.contentType)
		}
		resp := h.send(req, keyA)
		if _, msg := resp.errorMessage(); resp.status != tt.wantStatus || msg != tt.wantMessage {
			t.Errorf("Content-Type %q: got %d %q, want %d %q", tt.contentType, resp.status, msg, tt.wantStatus, tt.wantMessage)
		}
	}
}

func TestValidEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"HOME": true, "_": true, "a_1": true, strings.Repeat("A", 256): true,
		"": false, "1X": false, "A-B": false, "A B": false, "É": false, strings.Repeat("A", 257): false,
	} {
		if got := validEnvName(name); got != want {
			t.Errorf("validEnvName(%q): got %v, want %v", name, got, want)
		}
	}
}
