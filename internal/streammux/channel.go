package streammux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// ErrStopped is a write to a channel whose peer reads no more (it called
// CloseRead or Close): what was written is lost, as with EPIPE.
var ErrStopped = errors.New("the peer reads no more on this channel")

// Channel is one duplex byte stream of a Mux, with its own flow control:
// its receiver holds at most Window bytes of it, and its writer waits for
// credit, so a channel nobody reads stalls only itself. Credit goes back
// only as Read takes bytes, so a reader that paces its reads paces the
// peer's writer.
type Channel struct {
	m    *Mux
	id   uint32
	ours bool

	// wsem serialises Write and CloseWrite, so no data follows the close;
	// a one-slot semaphore, so a deadline bounds the wait for it.
	wsem chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	// buf is a ring of Window bytes (allocated with the first data) that
	// holds size bytes from head: what the peer sent and nobody has read.
	buf        []byte
	head, size int
	// room is how much more the peer may send before more credit.
	room int
	// owed is what was read and not yet given back.
	owed int
	// credit is how much more this end may send.
	credit int
	// closing: CloseWrite was called; sentClose: its frame went out.
	closing, sentClose bool
	// readClosed: CloseRead was called; sentStop: our stop went out.
	readClosed, sentStop bool
	// doneAt is when both our close and our stop had gone out: since
	// then the peer owes its own (Mux.OwedFor).
	doneAt time.Time
	// peerClosed: the peer writes no more; peerStopped: it reads no more.
	peerClosed, peerStopped bool
	// waiting counts the Reads and Writes waiting on cond.
	waiting int
	// readBy and writeBy bound Read's wait for data and Write's for
	// credit and the stream (zero: no bound); timers wake the waiters.
	readBy, writeBy       time.Time
	readTimer, writeTimer *time.Timer
}

func newChannel(m *Mux, id uint32, ours bool) *Channel {
	ch := &Channel{m: m, id: id, ours: ours, room: m.cfg.Window, credit: m.cfg.Window, wsem: make(chan struct{}, 1)}
	ch.wsem <- struct{}{}
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

// wait waits on cond, counted in waiting; mu is held.
func (ch *Channel) wait() {
	ch.waiting++
	ch.cond.Wait()
	ch.waiting--
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
// was read, the stream's error once it ended. An empty p returns at once.
func (ch *Channel) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	ch.mu.Lock()
	for ch.size == 0 && !ch.peerClosed && !ch.readClosed && !ch.ended() && !passed(ch.readBy) {
		ch.wait()
	}
	switch {
	case ch.readClosed:
		ch.mu.Unlock()
		return 0, fmt.Errorf("reading channel %d: %w", ch.id, ErrClosed)
	case ch.size > 0:
		n := ch.ringRead(p)
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
	return 0, fmt.Errorf("reading channel %d: %w", ch.id, ch.m.Err())
}

// ringWrite appends p to the ring, within its room; mu is held.
func (ch *Channel) ringWrite(p []byte) {
	if ch.buf == nil {
		ch.buf = make([]byte, ch.m.cfg.Window)
	}
	tail := (ch.head + ch.size) % len(ch.buf)
	k := copy(ch.buf[tail:], p)
	copy(ch.buf, p[k:])
	ch.size += len(p)
}

// ringRead takes up to len(p) bytes from the ring; mu is held.
func (ch *Channel) ringRead(p []byte) int {
	n := min(len(p), ch.size)
	k := copy(p[:n], ch.buf[ch.head:])
	copy(p[k:n], ch.buf)
	ch.head = (ch.head + n) % len(ch.buf)
	ch.size -= n
	ch.release()
	return n
}

// release frees the ring once all was read after the peer's close:
// nothing more can come; mu is held.
func (ch *Channel) release() {
	if ch.size == 0 && ch.peerClosed {
		ch.buf, ch.head = nil, 0
	}
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

// SetWriteDeadline bounds Write: past t it fails with
// os.ErrDeadlineExceeded, having sent what it returns it sent. It is
// checked before each frame, bounds the waits for credit, for another
// Write on the channel and for the stream; a frame's write already under
// way is bounded by the stream's WriteTimeout instead. The zero time
// removes the bound.
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

// giveBack notes n bytes read and unlocks ch.mu; once a quarter of the
// window is owed (and the peer still writes) the flusher gives it back,
// and once all is read after the peer's close it sends our stop.
func (ch *Channel) giveBack(n int) {
	ch.owed += n
	due := !ch.peerClosed && ch.owed >= ch.m.cfg.Window/4
	due = due || ch.stopDue()
	ch.mu.Unlock()
	if due {
		ch.m.owe(ch)
	}
}

// stopDue says our reader is done and its stop has not gone out: it
// closed, or read all after the peer's close; mu is held.
func (ch *Channel) stopDue() bool {
	return !ch.sentStop && (ch.readClosed || (ch.peerClosed && ch.size == 0))
}

// takeCredit is the credit to give back now, counted as room at once:
// none once the peer writes no more or our reader is gone.
func (ch *Channel) takeCredit() uint32 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.peerClosed || ch.readClosed {
		ch.owed = 0
	}
	n := ch.owed
	ch.room += n
	ch.owed = 0
	return uint32(n)
}

// Write sends p, waiting for credit as the peer reads.
func (ch *Channel) Write(p []byte) (int, error) {
	ch.mu.Lock()
	by := ch.writeBy
	ch.mu.Unlock()
	if err := acquire(ch.wsem, by, ch.m.done); err != nil {
		return 0, ch.writeError(err)
	}
	defer func() { ch.wsem <- struct{}{} }()
	done := 0
	for len(p) > 0 {
		n, by, err := ch.reserve(len(p))
		if err != nil {
			return done, err
		}
		if err := ch.m.write(header{typ: frameData, id: ch.id, n: uint32(n)}, p[:n], by); err != nil {
			ch.unreserve(n)
			return done, ch.writeError(err)
		}
		done += n
		p = p[n:]
	}
	return done, nil
}

// writeError wraps why a Write stopped; errEnded is the stream's end.
func (ch *Channel) writeError(err error) error {
	if errors.Is(err, errEnded) {
		err = ch.m.Err()
	}
	return fmt.Errorf("writing channel %d: %w", ch.id, err)
}

// reserve waits for credit and takes up to want bytes of it, at most one
// frame's worth, unless the write's deadline has passed; it returns the
// deadline for the frame's wait for the stream.
func (ch *Channel) reserve(want int) (int, time.Time, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for ch.credit == 0 && !ch.closing && !ch.peerStopped && !ch.ended() && !passed(ch.writeBy) {
		ch.wait()
	}
	var err error
	switch {
	case ch.closing:
		err = ErrClosed
	case ch.peerStopped:
		err = ErrStopped
	case ch.ended():
		err = ch.m.Err()
	case passed(ch.writeBy):
		err = os.ErrDeadlineExceeded
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("writing channel %d: %w", ch.id, err)
	}
	n := min(want, ch.credit, ch.m.cfg.MaxPayload)
	ch.credit -= n
	return n, ch.writeBy, nil
}

// unreserve gives back credit a frame that did not go out took.
func (ch *Channel) unreserve(n int) {
	ch.mu.Lock()
	ch.credit += n
	ch.mu.Unlock()
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
	if err := acquire(ch.wsem, time.Time{}, ch.m.done); err != nil {
		return fmt.Errorf("closing channel %d: %w", ch.id, ch.m.Err())
	}
	defer func() { ch.wsem <- struct{}{} }()
	if err := ch.sendEnd(frameClose); err != nil {
		return fmt.Errorf("closing channel %d: %w", ch.id, err)
	}
	return nil
}

// sendStop sends our stop if it is due (the flusher's part).
func (ch *Channel) sendStop() error {
	ch.mu.Lock()
	due := ch.stopDue()
	ch.mu.Unlock()
	if !due {
		return nil
	}
	return ch.sendEnd(frameStop)
}

// sendEnd writes our close or stop. A channel then closed and stopped
// both ways is forgotten before the frame goes out: the peer, once it
// has it, may open another in its place.
func (ch *Channel) sendEnd(typ byte) error {
	m := ch.m
	if err := m.lock(time.Time{}); err != nil {
		return err
	}
	defer m.unlock()
	ch.mu.Lock()
	if typ == frameClose {
		ch.sentClose = true
	} else {
		ch.sentStop = true
	}
	if ch.sentClose && ch.sentStop && ch.doneAt.IsZero() {
		ch.doneAt = time.Now()
	}
	fin := ch.finished()
	ch.mu.Unlock()
	if fin {
		m.mu.Lock()
		m.forget(ch)
		m.mu.Unlock()
	}
	return m.writeLocked(header{typ: typ, id: ch.id}, nil)
}

// doneHere says this end sent both its close and its stop.
func (ch *Channel) doneHere() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.sentClose && ch.sentStop
}

// doneBefore says this end had sent both its close and its stop by t.
func (ch *Channel) doneBefore(t time.Time) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.sentClose && ch.sentStop && !ch.doneAt.After(t)
}

// finished says both ends closed and stopped: nothing more may come on
// ch, and nothing of it is buffered; mu is held.
func (ch *Channel) finished() bool {
	return ch.sentClose && ch.sentStop && ch.peerClosed && ch.peerStopped
}

// CloseRead drops what the peer sent and tells it this end reads no
// more: its pending and later Writes fail with ErrStopped. No credit is
// given for what is dropped, so a peer still writing waits for the stop
// rather than flood a reader gone.
func (ch *Channel) CloseRead() {
	ch.mu.Lock()
	ch.readClosed = true
	ch.buf, ch.head, ch.size = nil, 0, 0
	ch.cond.Broadcast()
	ch.giveBack(0)
}

// Close closes both ways.
func (ch *Channel) Close() error {
	ch.CloseRead()
	return ch.CloseWrite()
}

// received takes a data frame from the reader: within the room the peer
// was given, and before its close. A reader gone drops it.
func (ch *Channel) received(p []byte) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.peerClosed:
		return fmt.Errorf("%w: data on channel %d after its close", ErrProtocol, ch.id)
	case len(p) > ch.room:
		return fmt.Errorf("%w: %d bytes on channel %d, which had room for %d", ErrProtocol, len(p), ch.id, ch.room)
	}
	ch.room -= len(p)
	if !ch.readClosed {
		ch.ringWrite(p)
		ch.cond.Broadcast()
	}
	return nil
}

// credited takes a credit frame: never more than the window in all, and
// never after the peer's stop. Its flusher writes a channel's credit and
// then its stop, and gives no credit once its reader is gone, so credit
// after the stop is a peer spending our reader's time on frames that
// cannot matter.
func (ch *Channel) credited(n uint32) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.peerStopped {
		return fmt.Errorf("%w: credit on channel %d after its stop", ErrProtocol, ch.id)
	}
	if uint64(ch.credit)+uint64(n) > uint64(ch.m.cfg.Window) {
		return fmt.Errorf("%w: credit of %d bytes on channel %d, past its window of %d", ErrProtocol, n, ch.id, ch.m.cfg.Window)
	}
	ch.credit += int(n)
	ch.cond.Broadcast()
	return nil
}

// remoteClosed takes the peer's close.
func (ch *Channel) remoteClosed() error {
	return ch.remoteEnd(&ch.peerClosed, "close")
}

// remoteStopped takes the peer's stop: our Writes fail from now on.
func (ch *Channel) remoteStopped() error {
	return ch.remoteEnd(&ch.peerStopped, "stop")
}

// remoteEnd sets the peer's close or stop flag, once; a channel then
// finished is forgotten, and our stop is queued if now due.
func (ch *Channel) remoteEnd(flag *bool, what string) error {
	ch.mu.Lock()
	if *flag {
		ch.mu.Unlock()
		return fmt.Errorf("%w: a second %s of channel %d", ErrProtocol, what, ch.id)
	}
	*flag = true
	ch.release()
	ch.cond.Broadcast()
	fin, due := ch.finished(), ch.stopDue()
	ch.mu.Unlock()
	if fin {
		ch.m.mu.Lock()
		ch.m.forget(ch)
		ch.m.mu.Unlock()
	}
	if due {
		ch.m.owe(ch)
	}
	return nil
}
