package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// bodyWait is how long one growth of a JSON body's buffer waits for room
// in its owner's share of MaxInFlightBodyBytes before the request is
// answered 503. A body grows a few times (a declared length at most
// twice), and the wait does not count against its read deadline.
const bodyWait = 5 * time.Second

// firstCharge is the buffer a JSON body of unknown or large length starts
// in, charged to the budget before its first byte arrives. A body that
// declared its length is charged the rest of it at once when this much
// has arrived: it is sending, and two such bodies of one key must not each
// hold half of the key's share and wait for the other. A chunked body's
// buffer doubles as bytes arrive, each growth charged before it is made,
// so it holds at most about twice what it has sent. A client that sends
// headers and then nothing holds this much, whatever it declared.
const firstCharge = 1 << 10

// errBusy answers a request whose body found no room within bodyWait.
// Every operation with a JSON body declares 503 unavailable, the code
// for "retry later", whereas 413 would say this body is never accepted
// and 429 too_many_sessions is about sessions.
var errBusy = &apiError{http.StatusServiceUnavailable, codeUnavailable,
	"server busy: this API key's request bodies (or all keys') fill the memory set aside for them; retry"}

// errTooManyWaiters is what acquire says when an owner whose share is
// full already has as many bodies waiting as its share could ever serve.
var errTooManyWaiters = errors.New("too many bodies of this owner wait for room")

// byteBudget is a weighted semaphore over the bytes of request bodies in
// memory at once: all owners together may hold total bytes and each owner
// at most perOwner, so one tenant's bodies cannot take the room another
// tenant's need. A waiter blocked by its owner's share is woken only by
// that owner's releases, one blocked by the total only by releases while
// the total was what blocked; there is no queue, so a large body may wait
// behind small ones, but never longer than bodyWait. An owner whose share
// is full may have at most perOwner/firstCharge bodies (one at least) waiting (more
// could never all be served); the next is refused at once, so a flood of
// waiters costs neither memory nor the wake-ups of other owners.
type byteBudget struct {
	mu       sync.Mutex
	free     int64
	perOwner int64
	held     map[string]int64
	owners   map[string]*ownerWait // owners with bodies waiting for their share
	total    chan struct{}         // closed when bytes are freed while waiters need the total; nil when none do
	// woken counts the waiters woken, for tests of who wakes whom.
	woken atomic.Int64
}

// ownerWait are the bodies of one owner waiting for room in its share.
type ownerWait struct {
	freed   chan struct{} // closed and replaced on this owner's releases
	waiters int
}

// newByteBudget shares total bytes among owners, perOwner at most each.
func newByteBudget(total, perOwner int64) *byteBudget {
	return &byteBudget{free: total, perOwner: perOwner, held: map[string]int64{}, owners: map[string]*ownerWait{}}
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
		wait, done, err := b.try(owner, n)
		if wait == nil {
			return err
		}
		select {
		case <-wait:
			b.woken.Add(1)
			done()
		case <-ctx.Done():
			done()
			return ctx.Err()
		}
	}
}

// try takes n bytes for owner if they are free; else it returns the
// channel to wait on and the func to call once the wait is over.
func (b *byteBudget) try(owner string, n int64) (<-chan struct{}, func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[owner]+n > b.perOwner {
		w := b.owners[owner]
		if w == nil {
			w = &ownerWait{freed: make(chan struct{})}
			b.owners[owner] = w
		}
		if int64(w.waiters) >= max(b.perOwner/firstCharge, 1) {
			return nil, nil, errTooManyWaiters
		}
		w.waiters++
		return w.freed, func() { b.stopWaiting(owner, w) }, nil
	}
	if n > b.free {
		if b.total == nil {
			b.total = make(chan struct{})
		}
		return b.total, func() {}, nil
	}
	b.free -= n
	b.held[owner] += n
	return nil, nil, nil
}

// stopWaiting counts a waiter of owner's out.
func (b *byteBudget) stopWaiting(owner string, w *ownerWait) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.waiters--; w.waiters == 0 && b.owners[owner] == w {
		delete(b.owners, owner)
	}
}

// release gives back n bytes owner took with acquire, and wakes owner's
// waiters and those waiting for the total.
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
	if w := b.owners[owner]; w != nil {
		close(w.freed)
		w.freed = make(chan struct{})
	}
	if b.total != nil {
		close(b.total)
		b.total = nil
	}
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
// than limit is refused before anything is read. The body must keep
// arriving (pacedBody); time spent waiting for budget is not held
// against it.
func (s *Server) readCharged(w http.ResponseWriter, r *http.Request, c *charge, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	end := limit // the buffer never needs to grow past this
	if r.ContentLength >= 0 {
		end = r.ContentLength
	}
	paced := s.pace(w, r, limit)
	src := http.MaxBytesReader(w, paced, limit)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == end {
				return buf, s.atEnd(src, limit)
			}
			size := nextSize(int64(cap(buf)), end, r.ContentLength >= 0)
			start := time.Now()
			err := c.grow(r.Context(), size-int64(cap(buf)))
			paced.extend(time.Since(start))
			if err != nil {
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

// nextSize is the buffer a body read into one of size has to grow to:
// firstCharge to start, then the whole declared length, or double for a
// body of unknown length; never past end.
func nextSize(size, end int64, declared bool) int64 {
	switch {
	case size == 0:
		return min(firstCharge, end)
	case declared:
		return end
	}
	return min(2*size, end)
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
