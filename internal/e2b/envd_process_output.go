package e2b

import (
	"context"
	"sync"
	"time"
)

// outChunk is one read of a process's stdout or stderr.
type outChunk struct {
	stderr bool
	data   []byte
}

// outputLog holds a process's output between its pipes and the streams
// attached to it (Start's, and each Connect's). Every stream reads from
// its own cursor; a chunk is dropped once every attached stream has read
// it. While a stream is attached, a writer whose chunk would pass the
// limit waits for the slowest to read (the process then blocks on its
// full pipe, as under envd); while none is, what no stream has read is
// kept up to the limit for the next Connect, and past it add refuses and
// the reader throws output away unread (see readOutput).
type outputLog struct {
	limit int

	mu      sync.Mutex
	chunks  []outChunk
	first   uint64 // sequence number of chunks[0]
	bytes   int    // held in chunks
	cursors map[*outCursor]struct{}
	// changed is closed and replaced on every change, waking waiters.
	changed chan struct{}
	closed  bool
	dropped int64
}

// outCursor is one attached stream's place in an outputLog.
type outCursor struct{ seq uint64 }

func newOutputLog(limit int) *outputLog {
	return &outputLog{limit: limit, cursors: map[*outCursor]struct{}{}, changed: make(chan struct{})}
}

// broadcast wakes every waiter; l.mu is held.
func (l *outputLog) broadcast() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// attach adds a stream that reads from the oldest outChunk kept; it fails
// when max streams are attached already.
func (l *outputLog) attach(max int) (*outCursor, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cursors) >= max {
		return nil, false
	}
	c := &outCursor{seq: l.first}
	l.cursors[c] = struct{}{}
	return c, true
}

// detach removes a stream; what it alone had not read stays kept.
func (l *outputLog) detach(c *outCursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cursors, c)
	l.trim()
	l.broadcast()
}

// trim drops the chunks every attached stream has read; l.mu is held.
func (l *outputLog) trim() {
	if len(l.cursors) == 0 {
		return
	}
	low := l.first + uint64(len(l.chunks))
	for c := range l.cursors {
		low = min(low, c.seq)
	}
	for l.first < low {
		l.bytes -= len(l.chunks[0].data)
		l.chunks[0] = outChunk{}
		l.chunks = l.chunks[1:]
		l.first++
	}
}

// full says whether no outChunk fits now and no stream will make room.
func (l *outputLog) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes >= l.limit && len(l.cursors) == 0
}

// add appends ch, waiting while streams are attached and it does not fit;
// stop ends the wait. It returns false when ch was not kept: no stream is
// attached and the log is full, or stop ended the wait.
func (l *outputLog) add(ch outChunk, stop <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if l.bytes+len(ch.data) <= l.limit || l.bytes == 0 {
			l.chunks = append(l.chunks, ch)
			l.bytes += len(ch.data)
			l.broadcast()
			l.mu.Unlock()
			return true
		}
		if len(l.cursors) == 0 {
			l.dropped += int64(len(ch.data))
			l.mu.Unlock()
			return false
		}
		wait := l.changed
		l.mu.Unlock()
		select {
		case <-wait:
		case <-stop:
			return false
		}
	}
}

// discarded counts n bytes thrown away unread.
func (l *outputLog) discarded(n int64) {
	l.mu.Lock()
	l.dropped += n
	l.mu.Unlock()
}

// close says no more output comes: streams get what is left, then the end.
func (l *outputLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.broadcast()
}

// nextKind is what a stream at c gets next.
type nextKind int

const (
	nextData      nextKind = iota // an outChunk
	nextEnd                       // the output ended: send the end event
	nextKeepalive                 // tick fired first
	nextDone                      // ctx ended first
)

// next waits for the next outChunk at c, the end, a tick or ctx's end.
func (l *outputLog) next(ctx context.Context, c *outCursor, tick <-chan time.Time) (outChunk, nextKind) {
	for {
		l.mu.Lock()
		if i := c.seq - l.first; i < uint64(len(l.chunks)) {
			ch := l.chunks[i]
			c.seq++
			l.trim()
			l.broadcast()
			l.mu.Unlock()
			return ch, nextData
		}
		if l.closed {
			l.mu.Unlock()
			return outChunk{}, nextEnd
		}
		wait := l.changed
		l.mu.Unlock()
		select {
		case <-wait:
		case <-tick:
			return outChunk{}, nextKeepalive
		case <-ctx.Done():
			return outChunk{}, nextDone
		}
	}
}
