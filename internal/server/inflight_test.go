package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

func (b *byteBudget) available() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.free
}

func TestByteBudget(t *testing.T) {
	b := newByteBudget(10)
	if err := b.acquire(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.acquire(ctx, 5); err == nil {
		t.Fatal("took 5 of the 4 bytes left")
	}
	got := make(chan error, 1)
	go func() { got <- b.acquire(context.Background(), 5) }()
	b.release(6)
	select {
	case err := <-got:
		if err != nil || b.available() != 5 {
			t.Errorf("after the release: %v, %d left", err, b.available())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was not woken by a release")
	}
}

// TestBodyBudget fills the budget and checks a request then waits and is
// answered 503, and that every request gives its share back, the handler
// as soon as it has decoded the body rather than once its exec is done.
func TestBodyBudget(t *testing.T) {
	const size = 1024
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes, c.MaxInFlightBodyBytes = size, size })
	id := h.create(keyA)
	if err := h.srv.bodies.acquire(context.Background(), size); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	resp := h.send(newRequest("POST", "/v1/sessions", "{}").WithContext(ctx), keyA)
	code, msg := resp.errorMessage()
	if resp.status != http.StatusServiceUnavailable || code != "unavailable" || msg != "server busy: too many large requests at once; retry" {
		t.Errorf("with the budget spent: got %d %s", resp.status, resp.body)
	}
	h.srv.bodies.release(size)

	h.fake.exec = func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		if n := h.srv.bodies.available(); n != size {
			t.Errorf("during the exec %d of %d bytes are free", n, size)
		}
		return spec.Result{}, nil
	}
	for _, req := range []struct{ target, body string }{
		{"/v1/sessions/" + id + "/exec", `{"command":["true"]}`},
		{"/v1/sessions/" + id + "/exec/stream", `{"command":["true"]}`},
		{"/v1/sessions", `{"ttl_seconds":"x"}`},
		{"/v1/sessions", `{"env":{"1X":"y"}}`}, // refused by the handler
	} {
		h.do("POST", req.target, keyA, req.body)
		if n := h.srv.bodies.available(); n != size {
			t.Errorf("%s %s: %d of %d bytes are free after it", req.target, req.body, n, size)
		}
	}
}
