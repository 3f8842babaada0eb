package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// bodyWait is how long a JSON body waits for room in its owner's share of
// MaxInFlightBodyBytes before the request is answered 503.
const bodyWait = 5 * time.Second

// firstCharge is the buffer a JSON body of unknown or large length starts
// in, charged to the budget before its first byte arrives; the buffer then
// doubles as bytes arrive, each growth charged before it is made, so a
// body holds at most about twice what it has sent. A client that sends
// headers and then nothing holds this much, whatever it declared.
const firstCharge = 1 << 10

// errBusy answers a request whose body found no room within bodyWait.
// Every operation with a JSON body declares 503 unavailable, the code
// for "retry later", whereas 413 would say this body is never accepted
// and 429 too_many_sessions is about sessions.
var errBusy = &apiError{http.StatusServiceUnavailable, codeUnavailable,
	"server busy: this API key's request bodies (or all keys') fill the memory set aside for them; retry"}

// byteBudget is a weighted semaphore over the bytes of request bodies in
// memory at once: all owners together may hold total bytes and each owner
// at most perOwner, so one tenant's bodies cannot take the room another
// tenant's need. Every release wakes all waiters to race for what was
// freed; there is no queue, so a large body may wait behind small ones,
// but never longer than bodyWait.
type byteBudget struct {
	mu       sync.Mutex
	free     int64
	perOwner int64
	held     map[string]int64
	freed    chan struct{} // closed and replaced on every release
}

// newByteBudget shares total bytes among owners, perOwner at most each.
func newByteBudget(total, perOwner int64) *byteBudget {
	return &byteBudget{free: total, perOwner: perOwner, held: map[string]int64{}, freed: make(chan struct{})}
}

// fairShare is what one owner of n may hold of total: an even split, but
// never less than one whole body of maxBody, so every request can be
// served. With n*maxBody <= total the shares add up to total and each
// owner's share is always free for it alone; beyond, one owner holds at
// most maxBody and it takes total/maxBody owners at once to fill the
// budget.
func fairShare(total, maxBody int64, n int) int64 {
	return max(maxBody, total/int64(max(n, 1)))
}

// acquire takes n bytes for owner, waiting until both the owner's share
// and the total have room, or ctx is done.
func (b *byteBudget) acquire(ctx context.Context, owner string, n int64) error {
	if n > b.perOwner {
		return fmt.Errorf("%d bytes is more than an owner's share of %d", n, b.perOwner)
	}
	for {
		b.mu.Lock()
		if n <= b.free && b.held[owner]+n <= b.perOwner {
			b.free -= n
			b.held[owner] += n
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

// release gives back n bytes owner took with acquire.
func (b *byteBudget) release(owner string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	if b.held[owner] -= n; b.held[owner] <= 0 {
		delete(b.held, owner)
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// charge is what one request's body holds of the budget: the capacity of
// the buffer it is read into. It is used by one goroutine at a time.
type charge struct {
	budget *byteBudget
	owner  string
	held   int64
}

// grow takes n more bytes, waiting at most bodyWait for them.
func (c *charge) grow(ctx context.Context, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, bodyWait)
	defer cancel()
	if err := c.budget.acquire(ctx, c.owner, n); err != nil {
		return errBusy
	}
	c.held += n
	return nil
}

// release gives back everything the body holds; once the buffer is
// dropped nothing may use it again.
func (c *charge) release() {
	c.budget.release(c.owner, c.held)
	c.held = 0
}

// readCharged reads r's body, of at most limit bytes, into a buffer whose
// capacity is charged to c before it is allocated: the body is paid for
// as it arrives, not by the length it declares. A declared length larger
// than limit is refused before anything is read.
func (s *Server) readCharged(w http.ResponseWriter, r *http.Request, c *charge, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	end := limit // the buffer never needs to grow past this
	if r.ContentLength >= 0 {
		end = r.ContentLength
	}
	src := http.MaxBytesReader(w, r.Body, limit)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == end {
				return buf, s.atEnd(src, limit)
			}
			size := min(max(2*int64(cap(buf)), firstCharge), end)
			if err := c.grow(r.Context(), size-int64(cap(buf))); err != nil {
				return nil, err
			}
			buf = append(make([]byte, 0, size), buf...)
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, s.bodyReadError(err, limit)
		}
	}
}

// atEnd checks that a body that filled its buffer has nothing more.
func (s *Server) atEnd(src io.Reader, limit int64) error {
	var probe [1]byte
	for range 8 { // a Reader may return nothing and no error; not forever
		n, err := src.Read(probe[:])
		switch {
		case n > 0:
			return tooLarge(limit)
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return s.bodyReadError(err, limit)
		}
	}
	return badRequest("reading the request body: it neither ends nor sends more")
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
