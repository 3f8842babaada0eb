package mcp

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestSessionCap checks that one tenant cannot open MCP sessions without
// end, that another still can, and that ending one frees a slot.
func TestSessionCap(t *testing.T) {
	next := 0
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(sessionHeader) == "" {
			next++
			w.Header().Set(sessionHeader, "s"+strconv.Itoa(next))
		}
		w.WriteHeader(http.StatusOK)
	})
	type ownerKey struct{}
	owner := func(ctx context.Context) string { s, _ := ctx.Value(ownerKey{}).(string); return s }
	h := newSessionCap(owner).wrap(inner)
	call := func(who, id, method string) int {
		r := httptest.NewRequest(method, "/mcp", nil).WithContext(context.WithValue(context.Background(), ownerKey{}, who))
		if id != "" {
			r.Header.Set(sessionHeader, id)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range maxHTTPSessionsPerOwner {
		if code := call("a", "", http.MethodPost); code != http.StatusOK {
			t.Fatalf("session %d of tenant a = %d, want 200", i, code)
		}
	}
	if code := call("a", "", http.MethodPost); code != http.StatusTooManyRequests {
		t.Errorf("tenant a past its cap = %d, want 429", code)
	}
	if code := call("b", "", http.MethodPost); code != http.StatusOK {
		t.Errorf("tenant b = %d, want 200: a's cap is a's", code)
	}
	if code := call("a", "s1", http.MethodDelete); code != http.StatusOK {
		t.Errorf("ending a session = %d", code)
	}
	if code := call("a", "", http.MethodPost); code != http.StatusOK {
		t.Errorf("tenant a after ending one = %d, want 200", code)
	}
}

// TestRenderCapsImages checks that a result carries at most maxImages
// images and names the ones left out.
func TestRenderCapsImages(t *testing.T) {
	var res spec.Result
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nfake"))
	for range maxImages + 3 {
		res.Outputs = append(res.Outputs, spec.Output{MimeType: "image/png", Data: png, Encoding: "base64"})
	}
	out := render(res, outcome{})
	imgs := 0
	for _, c := range out.Content {
		if _, ok := c.(*sdk.ImageContent); ok {
			imgs++
		}
	}
	text := out.Content[0].(*sdk.TextContent).Text
	if imgs != maxImages || strings.Count(text, "left out") != 3 {
		t.Errorf("render of %d images attached %d and named %d left out; want %d and 3", maxImages+3, imgs, strings.Count(text, "left out"), maxImages)
	}
}
