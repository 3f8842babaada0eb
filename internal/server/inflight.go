package server

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyWait is how long a JSON body waits for its share of
// MaxInFlightBodyBytes before the request is answered 503.
const bodyWait = 5 * time.Second

// errBusy answers a request whose body found no room within bodyWait.
// Every operation with a JSON body declares 503 unavailable, the code
// for "retry later", whereas 413 would say this body is never accepted
// and 429 too_many_sessions is about sessions.
var errBusy = &apiError{http.StatusServiceUnavailable, codeUnavailable,
	"server busy: too many large requests at once; retry"}

// byteBudget is a weighted semaphore over the bytes of request bodies in
// memory at once. Every release wakes all waiters to race for what was
// freed; there is no queue, so a large body may wait behind small ones,
// but never longer than bodyWait.
type byteBudget struct {
	mu    sync.Mutex
	free  int64
	freed chan struct{} // closed and replaced on every release
}

func newByteBudget(n int64) *byteBudget {
	return &byteBudget{free: n, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting until they are free or ctx is done.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if n <= b.free {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives back n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	close(b.freed)
	b.freed = make(chan struct{})
}

// holdBody takes r's body's share of the budget before it is read: its
// Content-Length, or MaxBodyBytes when the length is not known. The
// returned func gives it back and may be called more than once.
func (s *Server) holdBody(r *http.Request) (func(), error) {
	n := r.ContentLength
	switch {
	case n == 0:
		return func() {}, nil
	case n > s.cfg.MaxBodyBytes:
		return func() {}, tooLarge(s.cfg.MaxBodyBytes)
	case n < 0:
		n = s.cfg.MaxBodyBytes
	}
	ctx, cancel := context.WithTimeout(r.Context(), bodyWait)
	defer cancel()
	if err := s.bodies.acquire(ctx, n); err != nil {
		return func() {}, errBusy
	}
	return sync.OnceFunc(func() { s.bodies.release(n) }), nil
}

// heldBody is a validated JSON body handed on to the handler. Once the
// handler has read it to the end its bytes are dropped and their share of
// the budget given back, so a long exec holds neither.
type heldBody struct {
	rest    []byte
	release func()
}

func (b *heldBody) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		b.rest = nil
		b.release()
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *heldBody) Close() error {
	b.rest = nil
	b.release()
	return nil
}
