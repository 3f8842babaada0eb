package server

import (
	"net/http"
	"testing"
)

// TestMountMCP: a mounted handler (as /mcp is) sits behind authentication,
// learns the key's tenant through OwnerFrom, and gets its body untouched
// by the spec's validation, which knows nothing of it.
func TestMountMCP(t *testing.T) {
	var owner, body string
	h := newHarness(t, func(c *Config) {
		c.Mount = map[string]http.Handler{"/mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			owner = OwnerFrom(r.Context())
			b := make([]byte, 64)
			n, _ := r.Body.Read(b)
			body = string(b[:n])
			w.WriteHeader(http.StatusAccepted)
		})}
	})
	if resp := h.do("POST", "/mcp", "", `{"jsonrpc":"2.0"}`); resp.status != http.StatusUnauthorized || owner != "" {
		t.Errorf("without a key: %d %s (handler saw owner %q), want 401 before the handler", resp.status, resp.body, owner)
	}
	resp := h.do("POST", "/mcp", keyA, `{"jsonrpc":"2.0","method":"initialize"}`)
	if resp.status != http.StatusAccepted || owner != ownerOf(keyA) || body != `{"jsonrpc":"2.0","method":"initialize"}` {
		t.Errorf("with key A: %d %s, owner %q, body %q; want 202 for key A's tenant with the body intact", resp.status, resp.body, owner, body)
	}
	if resp := h.do("GET", "/mcp/other", keyA, ""); resp.status != http.StatusNotFound {
		t.Errorf("GET /mcp/other = %d, want the API's 404", resp.status)
	}
	h.healthy()
}
