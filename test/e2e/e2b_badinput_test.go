package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// e2bSandbox is the part of E2B's create answer the raw tests use.
type e2bSandbox struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

// e2bCreate creates a sandbox through E2B's REST control plane as key.
func (s *apiServer) e2bCreate(t *testing.T, key string) e2bSandbox {
	t.Helper()
	body := strings.NewReader(`{"templateID":"base","timeout":120,"secure":true}`)
	code, b := s.e2bCall(t, "POST", "/v2/sandboxes", http.Header{"X-API-Key": {key}, "Content-Type": {"application/json"}}, body)
	var sb e2bSandbox
	if code != http.StatusCreated || json.Unmarshal(b, &sb) != nil || sb.SandboxID == "" || sb.EnvdAccessToken == "" {
		t.Fatalf("POST /v2/sandboxes = %d %s, want 201 with a sandboxID and an envdAccessToken", code, b)
	}
	t.Cleanup(func() {
		if code, b := s.e2bCall(t, "DELETE", "/sandboxes/"+sb.SandboxID, http.Header{"X-API-Key": {key}}, nil); code != http.StatusNoContent && code != http.StatusNotFound {
			t.Errorf("DELETE /sandboxes/%s = %d %s, want 204", sb.SandboxID, code, b)
		}
	})
	return sb
}

// e2bCall sends one raw request and returns the status and (at most
// 1 MiB of) the body.
func (s *apiServer) e2bCall(t *testing.T, method, path string, h http.Header, body io.Reader) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// envd is the header set of a data-plane call to sb's envd with token.
func envd(id, token, contentType string) http.Header {
	h := http.Header{"E2b-Sandbox-Id": {id}, "E2b-Sandbox-Port": {"49983"}, "Connect-Protocol-Version": {"1"}}
	if token != "" {
		h.Set("X-Access-Token", token)
	}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return h
}

// envelope is one Connect stream frame: flags, big-endian length, data.
// length may differ from len(data), as a hostile client's may.
func envelope(flags byte, length uint32, data []byte) []byte {
	b := make([]byte, 5, 5+len(data))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], length)
	return append(b, data...)
}

// connectErrorCode is the Connect error code in an answer: a unary JSON
// error body, or the end frame of a stream (walked frame by frame, since
// frames may come before it).
func connectErrorCode(b []byte) string {
	var e struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil {
		return e.Code
	}
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if n > len(b)-5 {
			return ""
		}
		if b[0]&0x02 != 0 {
			if json.Unmarshal(b[5:5+n], &e) != nil {
				return ""
			}
			return e.Error.Code
		}
		b = b[5+n:]
	}
	return ""
}

// TestE2BBadInput: malformed Connect envelopes, unknown services and
// methods, huge frames, wrong tokens and unknown ports each get a clear
// error, and another sandbox (and the attacked one) keep working.
func TestE2BBadInput(t *testing.T) {
	srv := e2bServer(t)
	victim := srv.e2bCreate(t, keyA)
	bystander := srv.e2bCreate(t, keyB)
	wrong := make([]byte, 32)
	if _, err := rand.Read(wrong); err != nil {
		t.Fatal(err)
	}
	const stream, unary = "application/connect+json", "application/json"
	startBody := []byte(`{"process":{"cmd":"/bin/echo","args":["x"]}}`)
	huge := bytes.Repeat([]byte("a"), 16<<20)
	tests := []struct {
		name, path string
		h          http.Header
		body       []byte
		// ok reports whether the answer is the clear error wanted.
		ok   func(code int, b []byte) bool
		want string
	}{
		{"envelope shorter than its header", "/process.Process/Start", envd(victim.SandboxID, victim.EnvdAccessToken, stream), []byte{0, 0, 0},
			isConnectError, "a Connect error"},
		{"envelope promising more than it sends", "/process.Process/Start", envd(victim.SandboxID, victim.EnvdAccessToken, stream), envelope(0, 1000, startBody),
			isConnectError, "a Connect error"},
		{"envelope of 4 GiB", "/process.Process/Start", envd(victim.SandboxID, victim.EnvdAccessToken, stream), envelope(0, 0xffffffff, startBody),
			isConnectError, "a Connect error"},
		{"compressed envelope never negotiated", "/process.Process/Start", envd(victim.SandboxID, victim.EnvdAccessToken, stream), envelope(1, uint32(len(startBody)), startBody),
			isConnectError, "a Connect error"},
		{"envelope of 16 MiB", "/process.Process/Start", envd(victim.SandboxID, victim.EnvdAccessToken, stream), envelope(0, uint32(len(huge)), huge),
			isConnectError, "a Connect error"},
		{"unary body of 16 MiB", "/filesystem.Filesystem/ListDir", envd(victim.SandboxID, victim.EnvdAccessToken, unary), append(append([]byte(`{"path":"`), huge...), `"}`...),
			func(code int, _ []byte) bool { return code >= 400 && code < 500 }, "a 4xx"},
		{"not JSON", "/filesystem.Filesystem/ListDir", envd(victim.SandboxID, victim.EnvdAccessToken, unary), []byte(`{"path":`),
			func(code int, b []byte) bool { return code == 400 && connectErrorCode(b) != "" }, "400 with a Connect error"},
		{"unknown service", "/nope.Nope/Call", envd(victim.SandboxID, victim.EnvdAccessToken, unary), []byte(`{}`),
			func(code int, _ []byte) bool { return code == 404 }, "404"},
		{"unknown method", "/process.Process/Nope", envd(victim.SandboxID, victim.EnvdAccessToken, unary), []byte(`{}`),
			func(code int, _ []byte) bool { return code == 404 }, "404"},
		{"no token", "/filesystem.Filesystem/ListDir", envd(victim.SandboxID, "", unary), []byte(`{"path":"/home/user"}`),
			func(code int, _ []byte) bool { return code == 401 }, "401"},
		{"wrong token", "/filesystem.Filesystem/ListDir", envd(victim.SandboxID, hex.EncodeToString(wrong), unary), []byte(`{"path":"/home/user"}`),
			func(code int, _ []byte) bool { return code == 401 }, "401"},
		{"another sandbox's token", "/filesystem.Filesystem/ListDir", envd(victim.SandboxID, bystander.EnvdAccessToken, unary), []byte(`{"path":"/home/user"}`),
			func(code int, _ []byte) bool { return code == 401 }, "401"},
		{"another sandbox's token on a stream", "/process.Process/Start", envd(victim.SandboxID, bystander.EnvdAccessToken, stream), envelope(0, uint32(len(startBody)), startBody),
			func(code int, _ []byte) bool { return code == 401 }, "401"},
	}
	for _, tt := range tests {
		code, b := srv.e2bCall(t, "POST", tt.path, tt.h, bytes.NewReader(tt.body))
		if !tt.ok(code, b) {
			t.Errorf("%s: POST %s = %d %.300q, want %s", tt.name, tt.path, code, b, tt.want)
		}
		if bytes.Contains(bytes.TrimSpace(b), []byte("\n")) && !strings.HasPrefix(tt.h.Get("Content-Type"), "application/connect") && code != 404 {
			t.Errorf("%s: error %.300q spans lines, want one line", tt.name, b)
		}
	}
	checkUnknownIDLooksLikeWrongToken(t, srv, victim)
	checkUnknownPort(t, srv, victim)
	for _, sb := range []e2bSandbox{victim, bystander} {
		code, b := srv.e2bCall(t, "POST", "/filesystem.Filesystem/ListDir", envd(sb.SandboxID, sb.EnvdAccessToken, unary), strings.NewReader(`{"path":"/home/user"}`))
		if code != http.StatusOK {
			t.Errorf("ListDir in %s after the bad input = %d %.300q, want 200", sb.SandboxID, code, b)
		}
	}
	srv.healthy(t)
}

// isConnectError: a stream's bad input is answered with a Connect error,
// whether as an HTTP error status or in the stream's end frame.
func isConnectError(code int, b []byte) bool {
	return code != http.StatusOK && code < 500 || code == http.StatusOK && connectErrorCode(b) != ""
}

// checkUnknownIDLooksLikeWrongToken: an id that does not exist and one
// that does with a wrong token get the same answer, so a caller learns
// nothing of which ids exist.
func checkUnknownIDLooksLikeWrongToken(t *testing.T, srv *apiServer, sb e2bSandbox) {
	t.Helper()
	body := `{"path":"/home/user"}`
	c1, b1 := srv.e2bCall(t, "POST", "/filesystem.Filesystem/ListDir", envd(sb.SandboxID, strings.Repeat("0", 64), "application/json"), strings.NewReader(body))
	c2, b2 := srv.e2bCall(t, "POST", "/filesystem.Filesystem/ListDir", envd("no-such-sandbox", strings.Repeat("0", 64), "application/json"), strings.NewReader(body))
	if c1 != c2 || !bytes.Equal(b1, b2) {
		t.Errorf("a wrong token = %d %q but an unknown sandbox id = %d %q, want the same answer", c1, b1, c2, b2)
	}
}

// checkUnknownPort: a port other than envd's and the interpreter's is a
// clear error naming the port, not a request to some other service.
func checkUnknownPort(t *testing.T, srv *apiServer, sb e2bSandbox) {
	t.Helper()
	h := envd(sb.SandboxID, sb.EnvdAccessToken, "")
	h.Set("E2b-Sandbox-Port", "8080")
	code, b := srv.e2bCall(t, "GET", "/", h, nil)
	if code < 400 || !strings.Contains(string(b), "8080") {
		t.Errorf("GET / on port 8080 = %d %.300q, want an error naming the port", code, b)
	}
}
