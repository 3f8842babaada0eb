package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMountMCP: a mounted handler (as /mcp is) sits behind authentication,
// learns the key's tenant through OwnerFrom, and gets its body untouched
// by the spec's validation, which knows nothing of it, but bounded and
// charged to the key's share of the body budget as an API body is.
func TestMountMCP(t *testing.T) {
	var owner, body string
	var held, left int64
	var h *harness
	h = newHarness(t, func(c *Config) {
		c.MaxBodyBytes = 1024
		c.Mount = map[string]http.Handler{"/mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			owner = OwnerFrom(r.Context())
			held = h.srv.bodies.heldBy(owner)
			b, _ := io.ReadAll(r.Body)
			body = string(b)
			left = h.srv.bodies.heldBy(owner)
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
	if held == 0 || left != 0 {
		t.Errorf("the body held %d bytes of the budget before the handler read it and %d after; want some, then none", held, left)
	}
	body = ""
	if resp := h.do("POST", "/mcp", keyA, strings.Repeat(" ", 1025)); resp.status != http.StatusRequestEntityTooLarge || body != "" {
		t.Errorf("a body over MaxBodyBytes: %d %s, handler saw %.20q; want 413 before the handler", resp.status, resp.body, body)
	}
	if resp := h.do("GET", "/mcp/other", keyA, ""); resp.status != http.StatusNotFound {
		t.Errorf("GET /mcp/other = %d, want the API's 404", resp.status)
	}
	h.healthy()
}
