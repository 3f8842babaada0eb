package streammux

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Channel is one duplex byte stream of a Mux, with its own flow control:
// its receiver holds at most Window bytes of it, and its writer waits for
// credit, so a channel nobody reads stalls only itself.
type Channel struct {
	m    *Mux
	id   uint32
	ours bool

	// wmu serialises Write and CloseWrite, so no data follows the close.
	wmu sync.Mutex

	mu   sync.Mutex
	cond *sync.Cond
	// buf is what the peer sent and nobody has read yet.
	buf bytes.Buffer
	// room is how much more the peer may send before more credit.
	room int
	// owed is what was read (or dropped) and not yet given back.
	owed int
	// credit is how much more this end may send.
	credit int
	// closing: CloseWrite was called; sentClose: its frame went out.
	closing, sentClose bool
	// peerClosed: the peer writes no more; readClosed: nobody reads.
	peerClosed, readClosed bool
	// readBy and writeBy bound Read's wait for data and Write's for
	// credit (zero: no bound); timers wake the waiters when they pass.
	readBy, writeBy       time.Time
	readTimer, writeTimer *time.Timer
}

func newChannel(m *Mux, id uint32, ours bool) *Channel {
	ch := &Channel{m: m, id: id, ours: ours, room: m.cfg.Window, credit: m.cfg.Window}
	ch.cond = sync.NewCond(&ch.mu)
	return ch
}

// ID is the channel's id on its stream, the same at both ends.
func (ch *Channel) ID() uint32 { return ch.id }

// wake wakes everything waiting on ch, for the stream's end.
func (ch *Channel) wake() {
	ch.mu.Lock()
	ch.cond.Broadcast()
	ch.mu.Unlock()
}

// ended says the stream is over.
func (ch *Channel) ended() bool {
	select {
	case <-ch.m.done:
		return true
	default:
		return false
	}
}

// Read reads what the peer sent: io.EOF once it closed its side and all
// was read, the stream's error once it ended.
func (ch *Channel) Read(p []byte) (int, error) {
	ch.mu.Lock()
	for ch.buf.Len() == 0 && !ch.peerClosed && !ch.readClosed && !ch.ended() && !passed(ch.readBy) {
		ch.cond.Wait()
	}
	switch {
	case ch.readClosed:
		ch.mu.Unlock()
		return 0, ErrClosed
	case ch.buf.Len() > 0:
		n, _ := ch.buf.Read(p)
		ch.giveBack(n)
		return n, nil
	case ch.peerClosed:
		ch.mu.Unlock()
		return 0, io.EOF
	case !ch.ended():
		ch.mu.Unlock()
		return 0, fmt.Errorf("reading channel %d: %w", ch.id, os.ErrDeadlineExceeded)
	}
	ch.mu.Unlock()
	return 0, ch.m.Err()
}

// SetReadDeadline bounds Read's wait for data: past t it fails with
// os.ErrDeadlineExceeded (what was sent is still there for a later
// Read). The zero time removes the bound.
func (ch *Channel) SetReadDeadline(t time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.readBy = t
	ch.readTimer = ch.arm(ch.readTimer, t)
}

// SetWriteDeadline bounds Write's wait for credit: past t it fails with
// os.ErrDeadlineExceeded, having sent what it returns it sent. The zero
// time removes the bound.
func (ch *Channel) SetWriteDeadline(t time.Time) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.writeBy = t
	ch.writeTimer = ch.arm(ch.writeTimer, t)
}

// arm makes timer wake ch's waiters at t (none for the zero time); ch.mu
// is held. A waiter woken rechecks its deadline, so a timer that fires
// for a deadline since moved does no harm.
func (ch *Channel) arm(timer *time.Timer, t time.Time) *time.Timer {
	if timer != nil {
		timer.Stop()
	}
	ch.cond.Broadcast()
	if t.IsZero() {
		return timer
	}
	if timer == nil {
		return time.AfterFunc(time.Until(t), ch.wake)
	}
	timer.Reset(time.Until(t))
	return timer
}

// passed says a deadline is set and has passed.
func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }

// giveBack notes n bytes read or dropped and unlocks ch.mu; once a
// quarter of the window is owed (and the peer still writes) the
// flusher gives it back.
func (ch *Channel) giveBack(n int) {
	ch.owed += n
	due := !ch.peerClosed && ch.owed >= ch.m.cfg.Window/4
	ch.mu.Unlock()
	if due {
		ch.m.owe(ch)
	}
}

// takeCredit is the credit to give back now, counted as room at once.
func (ch *Channel) takeCredit() uint32 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.peerClosed {
		ch.owed = 0
	}
	n := ch.owed
	ch.room += n
	ch.owed = 0
	return uint32(n)
}

// Write sends p, waiting for credit as the peer reads.
func (ch *Channel) Write(p []byte) (int, error) {
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	done := 0
	for len(p) > 0 {
		n, err := ch.reserve(len(p))
		if err != nil {
			return done, err
		}
		if err := ch.m.write(header{typ: frameData, id: ch.id, n: uint32(n)}, p[:n]); err != nil {
			return done, err
		}
		done += n
		p = p[n:]
	}
	return done, nil
}

// reserve waits for credit and takes up to want bytes of it, at most one
// frame's worth.
func (ch *Channel) reserve(want int) (int, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for ch.credit == 0 && !ch.closing && !ch.ended() && !passed(ch.writeBy) {
		ch.cond.Wait()
	}
	switch {
	case ch.closing:
		return 0, fmt.Errorf("writing channel %d: %w", ch.id, ErrClosed)
	case ch.ended():
		return 0, fmt.Errorf("writing channel %d: %w", ch.id, ch.m.Err())
	case ch.credit == 0:
		return 0, fmt.Errorf("writing channel %d: %w", ch.id, os.ErrDeadlineExceeded)
	}
	n := min(want, ch.credit, ch.m.cfg.MaxPayload)
	ch.credit -= n
	return n, nil
}

// CloseWrite tells the peer this end writes no more; a Write waiting for
// credit returns ErrClosed.
func (ch *Channel) CloseWrite() error {
	ch.mu.Lock()
	if ch.closing {
		ch.mu.Unlock()
		return nil
	}
	ch.closing = true
	ch.cond.Broadcast()
	ch.mu.Unlock()
	ch.wmu.Lock()
	defer ch.wmu.Unlock()
	m := ch.m
	m.wmu.Lock()
	defer m.wmu.Unlock()
	// The channel is forgotten before its close goes out: the peer, once
	// it has it, may open another in its place.
	ch.mu.Lock()
	ch.sentClose = true
	both := ch.peerClosed
	ch.mu.Unlock()
	if both {
		m.mu.Lock()
		m.forget(ch)
		m.mu.Unlock()
	}
	if err := m.writeLocked(header{typ: frameClose, id: ch.id}, nil); err != nil {
		return fmt.Errorf("closing channel %d: %w", ch.id, err)
	}
	return nil
}

// CloseRead drops what the peer sent and will send, giving it back as
// credit, so a peer still writing is never stalled by a reader gone.
func (ch *Channel) CloseRead() {
	ch.mu.Lock()
	ch.readClosed = true
	n := ch.buf.Len()
	ch.buf = bytes.Buffer{}
	ch.cond.Broadcast()
	ch.giveBack(n)
}

// Close closes both ways.
func (ch *Channel) Close() error {
	ch.CloseRead()
	return ch.CloseWrite()
}

// received takes a data frame from the reader: within the room the peer
// was given, and before its close.
func (ch *Channel) received(p []byte) error {
	ch.mu.Lock()
	switch {
	case ch.peerClosed:
		ch.mu.Unlock()
		return fmt.Errorf("%w: data on channel %d after its close", ErrProtocol, ch.id)
	case len(p) > ch.room:
		ch.mu.Unlock()
		return fmt.Errorf("%w: %d bytes on channel %d, which had room for %d", ErrProtocol, len(p), ch.id, ch.room)
	}
	ch.room -= len(p)
	if ch.readClosed {
		ch.giveBack(len(p))
		return nil
	}
	ch.buf.Write(p)
	ch.cond.Broadcast()
	ch.mu.Unlock()
	return nil
}

// credited takes a credit frame: never more than the window in all.
func (ch *Channel) credited(n uint32) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if uint64(ch.credit)+uint64(n) > uint64(ch.m.cfg.Window) {
		return fmt.Errorf("%w: credit of %d bytes on channel %d, past its window of %d", ErrProtocol, n, ch.id, ch.m.cfg.Window)
	}
	ch.credit += int(n)
	ch.cond.Broadcast()
	return nil
}

// remoteClosed takes the peer's close; a channel closed both ways is
// forgotten.
func (ch *Channel) remoteClosed() error {
	ch.mu.Lock()
	if ch.peerClosed {
		ch.mu.Unlock()
		return fmt.Errorf("%w: a second close of channel %d", ErrProtocol, ch.id)
	}
	ch.peerClosed = true
	both := ch.sentClose
	ch.cond.Broadcast()
	ch.mu.Unlock()
	if both {
		ch.m.mu.Lock()
		ch.m.forget(ch)
		ch.m.mu.Unlock()
	}
	return nil
}
