package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestStalledStreamClientKillsExec sends a stream request over a raw
// connection that never reads while the exec writes far more output than
// the socket buffers hold: the stream must give up, cancel the exec and
// let the handler return, rather than block the exec's output for ever.
func TestStalledStreamClientKillsExec(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StreamWriteTimeout = 200 * time.Millisecond })
	id := h.create(keyA)
	cancelled := make(chan struct{})
	h.fake.exec = func(ctx context.Context, _ sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for written := 0; written < 1<<30 && ctx.Err() == nil; written += len(chunk) {
			_, _ = live.Stdout.Write(chunk)
		}
		if ctx.Err() != nil {
			close(cancelled)
		}
		return spec.Result{}, ctx.Err()
	}
	returned := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if r.URL.Path != "/v1/sessions" {
				close(returned)
			}
		}()
		h.srv.Handler().ServeHTTP(w, r)
	}))
	defer ts.Close()

	conn := dialSlowReader(t, ts.Listener.Addr().String())
	body := `{"command":["yes"]}`
	fmt.Fprintf(conn, "POST /v1/sessions/%s/exec/stream HTTP/1.1\r\nHost: warden\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", id, keyA, len(body), body)

	for what, done := range map[string]chan struct{}{"the exec's context was cancelled": cancelled, "the handler returned": returned} {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("a client that never reads: nothing says %s", what)
		}
	}
	// What did reach the client is a well-formed stream of output.
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Errorf("status line: %q, %v", status, err)
	}
}
