package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

func (b *byteBudget) heldBy(owner string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[owner]
}

func TestByteBudget(t *testing.T) {
	b := newByteBudget(10, 10)
	if _, err := b.acquireUpTo(context.Background(), "a", 6, 6); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.acquireUpTo(ctx, "b", 5, 5); err == nil {
		t.Fatal("took 5 of the 4 bytes left")
	}
	got := make(chan error, 1)
	go func() { _, err := b.acquireUpTo(context.Background(), "b", 5, 5); got <- err }()
	b.release("a", 6)
	select {
	case err := <-got:
		if err != nil || b.available() != 5 {
			t.Errorf("after the release: %v, %d left", err, b.available())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was not woken by a release")
	}
}

// TestByteBudgetShares checks one owner never holds more than its share,
// however it asks, while another owner's share stays free.
func TestByteBudgetShares(t *testing.T) {
	b := newByteBudget(100, 50)
	for _, n := range []int64{30, 20} {
		if _, err := b.acquireUpTo(context.Background(), "greedy", n, n); err != nil {
			t.Fatalf("greedy's %d bytes within its share: %v", n, err)
		}
	}
	for _, n := range []int64{1, 50, 51} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		if _, err := b.acquireUpTo(ctx, "greedy", n, n); err == nil {
			t.Errorf("greedy took %d more bytes past its share of 50", n)
		}
		cancel()
	}
	if _, err := b.acquireUpTo(context.Background(), "other", 50, 50); err != nil {
		t.Errorf("other's whole share with greedy's spent: %v", err)
	}
	b.release("greedy", 50)
	b.release("other", 50)
	if got := b.available(); got != 100 || len(b.held) != 0 {
		t.Errorf("after every release: %d free, held %v; want 100 free, none held", got, b.held)
	}
}

func TestFairShare(t *testing.T) {
	tests := []struct {
		total, maxBody int64
		owners         int
		want           int64
	}{
		{64, 8, 1, 64},  // one key may use it all
		{64, 8, 2, 32},  // two keys split it
		{64, 8, 8, 8},   // eight keys: one body each
		{64, 8, 100, 8}, // many keys: still one whole body
		{64, 8, 0, 64},  // no owners counted: as one
	}
	for _, tt := range tests {
		if got := fairShare(tt.total, tt.maxBody, tt.owners); got != tt.want {
			t.Errorf("fairShare(%d, %d, %d) = %d, want %d", tt.total, tt.maxBody, tt.owners, got, tt.want)
		}
	}
}

// TestBodyBudget fills a key's share and checks its next request then
// waits and is answered 503, and that every request gives its charge
// back, the handler as soon as it has decoded the body rather than once
// its exec is done.
func TestBodyBudget(t *testing.T) {
	const size = 1024
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes, c.MaxInFlightBodyBytes = size, 2*size })
	id := h.create(keyA)
	if _, err := h.srv.bodies.acquireUpTo(context.Background(), ownerOf(keyA), size, size); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	resp := h.send(newRequest("POST", "/v1/sessions", "{}").WithContext(ctx), keyA)
	code, msg := resp.errorMessage()
	if resp.status != http.StatusServiceUnavailable || code != "unavailable" || !strings.HasPrefix(msg, "server busy: ") {
		t.Errorf("with its share spent: got %d %s, want 503 unavailable, server busy", resp.status, resp.body)
	}
	if resp := h.do("POST", "/v1/sessions", keyB, "{}"); resp.status != http.StatusCreated {
		t.Errorf("another key with the first one's share spent: got %d %s, want 201", resp.status, resp.body)
	}
	h.srv.bodies.release(ownerOf(keyA), size)

	h.fake.exec = func(context.Context, sandbox.ExecRequest, sandbox.Stream) (spec.Result, error) {
		if n := h.srv.bodies.available(); n != 2*size {
			t.Errorf("during the exec %d of %d bytes are free", n, 2*size)
		}
		return spec.Result{}, nil
	}
	for _, req := range []struct{ target, body string }{
		{"/v1/sessions/" + id + "/exec", `{"command":["true"]}`},
		{"/v1/sessions/" + id + "/exec/stream", `{"command":["true"]}`},
		{"/v1/sessions", `{"ttl_seconds":"x"}`},
		{"/v1/sessions", `{"env":{"1X":"y"}}`}, // refused by the handler
		{"/v1/sessions", strings.Repeat(" ", size+1)},
	} {
		h.do("POST", req.target, keyA, req.body)
		if n := h.srv.bodies.available(); n != 2*size {
			t.Errorf("%s %.20q: %d of %d bytes are free after it", req.target, req.body, n, 2*size)
		}
	}
}

// TestBodyCharge checks what a body holds of the budget while it is read:
// its buffer, never more than about twice what arrived nor than it
// declared, and the whole body arrives intact.
func TestBodyCharge(t *testing.T) {
	const limit = 64 << 10
	tests := []struct {
		name     string
		size     int
		declared bool
		want     int64 // charge once the whole body is read
	}{
		{"empty chunked", 0, false, firstCharge},
		{"small declared", 10, true, 10},
		{"small chunked", 10, false, firstCharge},
		{"1 KiB + 1 chunked", firstCharge + 1, false, 2 * firstCharge},
		{"40 KiB declared", 40 << 10, true, 40 << 10},
		{"40 KiB chunked", 40 << 10, false, 64 << 10},
		{"at the limit chunked", limit, false, limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MaxBodyBytes = limit })
			body := strings.Repeat("x", tt.size)
			req := newRequest("POST", "/", body)
			req.ContentLength = -1
			if tt.declared {
				req.ContentLength = int64(tt.size)
			}
			c := &charge{budget: h.srv.bodies, owner: "o"}
			got, err := h.srv.readCharged(nil, req, c, limit)
			if err != nil || string(got) != body {
				t.Fatalf("read %d bytes, %v; want the %d sent", len(got), err, tt.size)
			}
			if c.held != tt.want || h.srv.bodies.heldBy("o") != tt.want {
				t.Errorf("charged %d (budget says %d), want %d", c.held, h.srv.bodies.heldBy("o"), tt.want)
			}
			c.release()
			if n := h.srv.bodies.heldBy("o"); n != 0 {
				t.Errorf("after release %d bytes still held", n)
			}
		})
	}
}

// TestByteBudgetWakesOwnWaiters checks a release wakes the waiters of
// its own owner only: a key's parked bodies cost nothing when another
// key's bodies come and go.
func TestByteBudgetWakesOwnWaiters(t *testing.T) {
	b := newByteBudget(100, 50)
	if _, err := b.acquireUpTo(context.Background(), "b", 50, 50); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := b.acquireUpTo(context.Background(), "b", 10, 10); got <- err }()
	waitFor(t, "b's body to wait", func() bool { return b.waiting("b") == 1 })
	for range 100 {
		if _, err := b.acquireUpTo(context.Background(), "a", 10, 10); err != nil {
			t.Fatal(err)
		}
		b.release("a", 10)
	}
	if n := b.woken.Load(); n != 0 {
		t.Errorf("a's 100 releases woke b's waiter %d times, want 0", n)
	}
	b.release("b", 10)
	if err := <-got; err != nil {
		t.Errorf("b's waiter after b's release: %v", err)
	}
}

// TestByteBudgetRefusesExcessWaiters checks an owner whose share is full
// may park no more bodies than its share could serve; the next is
// refused at once rather than parked.
func TestByteBudgetRefusesExcessWaiters(t *testing.T) {
	const share = 4 * firstCharge
	b := newByteBudget(4*share, share)
	if _, err := b.acquireUpTo(context.Background(), "b", share, share); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, share/firstCharge)
	for range share / firstCharge {
		go func() { _, err := b.acquireUpTo(ctx, "b", firstCharge, firstCharge); errs <- err }()
	}
	waitFor(t, "b's bodies to wait", func() bool { return b.waiting("b") == share/firstCharge })
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if _, err := b.acquireUpTo(ctx2, "b", firstCharge, firstCharge); !errors.Is(err, errTooManyWaiters) {
		t.Errorf("one waiter too many: got %v, want %v", err, errTooManyWaiters)
	}
	if _, err := b.acquireUpTo(context.Background(), "a", share, share); err != nil {
		t.Errorf("another owner's share: %v", err)
	}
	cancel()
	for range share / firstCharge {
		<-errs //nolint:errcheck // a wait for the goroutine to end: its result is not what this test checks
	}
	if n := b.waiting("b"); n != 0 {
		t.Errorf("%d waiters still counted after they gave up", n)
	}
}

func (b *byteBudget) waiting(owner string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.owners[owner]; w != nil {
		return w.waiters
	}
	return 0
}

// panickyBody panics on its first read, as a bug in reading a body might.
type panickyBody struct{}

func (panickyBody) Read([]byte) (int, error) { panic("reading the body") }
func (panickyBody) Close() error             { return nil }

// TestBodyChargeSurvivesPanic checks a panic while a body is read (after
// its first charge) still gives the charge back: the recovered request
// must not leak its key's share.
func TestBodyChargeSurvivesPanic(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Mount = map[string]http.Handler{"/mcp": http.NotFoundHandler()} })
	for _, target := range []string{"/v1/sessions", "/mcp"} {
		req := newRequest("POST", target, "")
		req.Body, req.ContentLength = panickyBody{}, -1
		req.Header.Set("Authorization", "Bearer "+keyA)
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusInternalServerError {
			t.Errorf("%s: got %d, want 500 from the recovered panic", target, rec.Code)
		}
		if n := h.srv.bodies.heldBy(ownerOf(keyA)); n != 0 {
			t.Errorf("%s: after the panic the key still holds %d bytes", target, n)
		}
	}
}

// TestChunkedBodiesShareAKey sends two chunked bodies of one key that
// together fit in its share, interleaved so that each has filled its
// buffer before either sends the rest: neither may wait for the other
// (each used to ask for as much again as it held, which the share could
// not give both, and one got 503 after bodyWait). The shares leave room
// for both tails once each growth takes only the least it needs when the
// share is tight, so no release is ever waited for.
func TestChunkedBodiesShareAKey(t *testing.T) {
	const half = 2 << 10 // each body sends this twice, then its tail
	tests := []struct {
		name  string
		share int64
		tail  int
	}{
		{"ending where its buffer ends", 4 * half, 0},
		{"ending in the room left", 5 * half, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MaxBodyBytes = 4 * half })
			h.srv.bodies = newByteBudget(tt.share, tt.share)
			var pws [2]*io.PipeWriter
			results := make(chan error, 2)
			want := strings.Repeat("x", 2*half+tt.tail)
			for i := range pws {
				pws[i] = readChunked(h, "o", 4*half, want, results)
			}
			go func() {
				for range 2 { // each body fills its buffer in turn
					for _, pw := range pws {
						if _, err := pw.Write([]byte(want[:half])); err != nil {
							return // its reader failed, and says why
						}
					}
				}
				for _, pw := range pws {
					go func() {
						_, err := pw.Write([]byte(want[2*half:]))
						pw.CloseWithError(err)
					}()
				}
			}()
			for i := range 2 {
				if err := awaitRead(t, results); err != nil {
					t.Errorf("body %d: %v, want both read whole", i, err)
				}
			}
			if n := h.srv.bodies.woken.Load(); n != 0 {
				t.Errorf("a body waited for the other's release (%d wakes), want neither to wait", n)
			}
			if n := h.srv.bodies.heldBy("o"); n != 0 {
				t.Errorf("after both bodies %d bytes still held", n)
			}
		})
	}
}

// TestChunkedBodyEndsBesideASender: in a key's share of 9 KiB, body A has
// sent 4097 bytes and goes on sending, and body B then ends at 2049
// bytes. B must be read whole at once: A's growth past 4 KiB, with the
// share too tight for its doubling, took only what it needed, leaving B
// the room for its last byte (A used to take all the room left, 3 KiB
// it had no bytes for, and B got 503 after bodyWait).
func TestChunkedBodyEndsBesideASender(t *testing.T) {
	const share, limit = 9 << 10, 8 << 10
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes = limit })
	h.srv.bodies = newByteBudget(share, share)
	wantA, wantB := strings.Repeat("a", 4097+100), strings.Repeat("b", 2049)
	resultsA, resultsB := make(chan error, 1), make(chan error, 1)
	pwA, pwB := readChunked(h, "o", limit, wantA, resultsA), readChunked(h, "o", limit, wantB, resultsB)
	defer pwA.Close()
	defer pwB.Close()
	steps := []struct {
		pw   *io.PipeWriter
		data string
		held int64 // the key's charge to wait for after the step
	}{
		{pwB, wantB[:2048], 2 << 10},
		{pwA, wantA[:4097], (2 << 10) + (4 << 10) + firstCharge},
	}
	for _, st := range steps {
		if _, err := st.pw.Write([]byte(st.data)); err != nil {
			t.Fatalf("sending %d bytes: %v", len(st.data), err)
		}
		waitFor(t, fmt.Sprintf("the key to hold %d bytes", st.held), func() bool { return h.srv.bodies.heldBy("o") >= st.held })
	}
	go func() {
		_, err := pwB.Write([]byte(wantB[2048:]))
		pwB.CloseWithError(err)
	}()
	if err := awaitRead(t, resultsB); err != nil {
		t.Errorf("B, ending while A still sends: %v, want it read whole at once", err)
	}
	go func() {
		_, err := pwA.Write([]byte(wantA[4097:]))
		pwA.CloseWithError(err)
	}()
	if err := awaitRead(t, resultsA); err != nil {
		t.Errorf("A, after B: %v, want it read whole", err)
	}
	if n := h.srv.bodies.woken.Load(); n != 0 {
		t.Errorf("a body waited for the other's release (%d wakes), want neither to wait", n)
	}
}

// readChunked reads a chunked body of owner's from the pipe it returns,
// in a goroutine, and sends on results whether it read want.
func readChunked(h *harness, owner string, limit int64, want string, results chan<- error) *io.PipeWriter {
	pr, pw := io.Pipe()
	req := newRequest("POST", "/", "")
	req.Body, req.ContentLength = pr, -1
	go func() {
		c := &charge{budget: h.srv.bodies, owner: owner}
		got, err := h.srv.readCharged(nil, req, c, limit)
		c.release()
		pr.CloseWithError(errors.New("read ended")) // unblocks the writer after a failure
		if err == nil && string(got) != want {
			err = fmt.Errorf("read %d bytes, want the %d sent", len(got), len(want))
		}
		results <- err
	}()
	return pw
}

// awaitRead waits, at most a minute, for a body's reader to end.
func awaitRead(t *testing.T, results <-chan error) error {
	t.Helper()
	select {
	case err := <-results:
		return err
	case <-time.After(time.Minute):
		t.Fatal("a body was still being read after a minute")
		return nil
	}
}
