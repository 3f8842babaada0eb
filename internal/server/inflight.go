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
// declared its length asks for the rest of it at once when this much has
// arrived and another byte follows; a chunked body's buffer doubles, each
// growth charged before it is made, so it holds at most about twice what
// it has sent. When its owner's share has less room than a growth asks,
// the growth takes only an eighth of the buffer (at least firstCharge, a
// bound on copies) and waits if even that is not there: a growth made in
// a tight share charges at most that much the body has not yet sent. Two
// bodies of one key whose sizes together, plus an eighth of the larger
// (at least firstCharge), fit its share never both wait for it (the
// total aside); one may still
// wait for the other's release when the other took a doubling while the
// share was roomy, and gets 503 if that takes more than bodyWait. A
// client that sends headers and then nothing holds firstCharge, whatever
// it declared.
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

// acquireUpTo takes most bytes for owner if they are free, else least,
// waiting until at least least are (or ctx is done), and says how many
// it took. A body that grows in a tight share takes only the least it
// needs rather than wait for more, or take all the room left and charge
// its owner for bytes that have not arrived.
func (b *byteBudget) acquireUpTo(ctx context.Context, owner string, least, most int64) (int64, error) {
	if least > b.perOwner {
		return 0, fmt.Errorf("%d bytes is more than an owner's share of %d", least, b.perOwner)
	}
	for {
		got, wait, done, err := b.try(owner, least, most)
		if wait == nil {
			return got, err
		}
		select {
		case <-wait:
			b.woken.Add(1)
			done()
		case <-ctx.Done():
			done()
			return 0, ctx.Err()
		}
	}
}

// try takes most bytes for owner if that many are free, else least if
// that many are; else it returns the channel to wait on and the func to
// call once the wait is over.
func (b *byteBudget) try(owner string, least, most int64) (int64, <-chan struct{}, func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[owner]+least > b.perOwner {
		w := b.owners[owner]
		if w == nil {
			w = &ownerWait{freed: make(chan struct{})}
			b.owners[owner] = w
		}
		if int64(w.waiters) >= max(b.perOwner/firstCharge, 1) {
			return 0, nil, nil, errTooManyWaiters
		}
		w.waiters++
		return 0, w.freed, func() { b.stopWaiting(owner, w) }, nil
	}
	if least > b.free {
		if b.total == nil {
			b.total = make(chan struct{})
		}
		return 0, b.total, func() {}, nil
	}
	n := most
	if room := min(b.perOwner-b.held[owner], b.free); room < most {
		n = least // a tight share gives each growth what it needs, no more
	}
	b.free -= n
	b.held[owner] += n
	return n, nil, nil, nil
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

// grow takes up to most more bytes, at least least, waiting at most
// bodyWait for them, and says how many it took.
func (c *charge) grow(ctx context.Context, least, most int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, bodyWait)
	defer cancel()
	n, err := c.budget.acquireUpTo(ctx, c.owner, least, most)
	if err != nil {
		return 0, errBusy
	}
	c.held += n
	return n, nil
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
			grown, err := s.grow(r.Context(), buf, src, paced, c, end, limit, r.ContentLength >= 0)
			switch {
			case err != nil:
				return nil, err
			case grown == nil: // the body ended where its buffer did
				return buf, nil
			}
			buf = grown
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

// grow makes room in buf, which is full, for more of a body that may end
// at end: first it reads one more byte, so a body that ends where its
// buffer does asks for nothing more, then it takes room up to
// nextSize, or only an eighth of the buffer (at least firstCharge) when
// the owner's share has less than that. It returns nil and no error
// when the body has ended.
func (s *Server) grow(ctx context.Context, buf []byte, src io.Reader, paced *pacedBody, c *charge, end, limit int64, declared bool) ([]byte, error) {
	var next [1]byte
	if len(buf) > 0 {
		more, err := s.more(src, next[:], limit)
		if err != nil || !more {
			return nil, err
		}
	}
	size := int64(cap(buf))
	want := nextSize(size, end, declared) - size
	start := time.Now()
	n, err := c.grow(ctx, min(want, max(firstCharge, size/8)), want)
	paced.extend(time.Since(start))
	if err != nil {
		return nil, err
	}
	grown := append(make([]byte, 0, size+n), buf...)
	if len(buf) > 0 {
		grown = append(grown, next[0])
	}
	return grown, nil
}

// more reads one byte of src into next, saying whether there was one: a
// body that ends there (io.EOF) has no more.
func (s *Server) more(src io.Reader, next []byte, limit int64) (bool, error) {
	for range 8 { // a Reader may return nothing and no error; not forever
		n, err := src.Read(next)
		switch {
		case n > 0:
			return true, nil
		case errors.Is(err, io.EOF):
			return false, nil
		case err != nil:
			return false, s.bodyReadError(err, limit)
		}
	}
	return false, badRequest("reading the request body: it neither ends nor sends more")
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
	more, err := s.more(src, probe[:], limit)
	if more {
		return tooLarge(limit)
	}
	return err
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
