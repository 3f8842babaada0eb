package streammux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is a stream or channel closed by this end.
var ErrClosed = errors.New("the stream is closed")

// ErrHungUp is a peer that closed the stream between frames: a clean
// end, not a breach.
var ErrHungUp = errors.New("the peer closed the stream")

// Conn is the stream a Mux runs on: its Close must unblock a pending
// Read and Write, which New checks by its SetDeadline (a net.Conn, or an
// *os.File of a pollable descriptor; a blocking file refuses deadlines).
type Conn interface {
	io.ReadWriteCloser
	SetDeadline(t time.Time) error
}

// Mux carries channels over one byte stream. One goroutine reads the
// stream and never writes to it, another writes the credit and stops the
// readers of channels give; frames are written whole, one at a time, so a
// writer blocked on a channel's credit or on the stream never holds up
// the reading end.
type Mux struct {
	conn Conn
	cfg  Config

	// wsem (a one-slot semaphore, so a deadline can bound the wait for
	// it) serialises frame writes and hands out the ids of our opens, so
	// they go out in order; wbuf, wtimer and writing are its.
	wsem   chan struct{}
	wbuf   []byte
	wtimer *time.Timer
	// base is the monotonic clock's origin for writing.
	base time.Time
	// writing is when the write in progress started (nanoseconds since
	// base, plus 1), or 0.
	writing atomic.Int64

	mu sync.Mutex
	// chans are the open channels, ours and the peer's.
	chans map[uint32]*Channel
	// nextID is the id of our next open; peerNext the peer's.
	nextID, peerNext uint32
	// ours and theirs count the open channels each end opened.
	ours, theirs int
	// freed is closed (and replaced) when one of our slots is freed.
	freed chan struct{}
	// owing are channels whose reader has credit or a stop to give.
	owing map[*Channel]struct{}
	err   error

	accepted chan *Channel
	flush    chan struct{}
	done     chan struct{}

	// pace holds the reader to ReadRate (nil: no bound); paceCtx ends its
	// wait with the stream; paceDebt is what the reader took and has not
	// yet waited for (the reader's alone).
	pace       pacer
	paceDebt   int
	paceCtx    context.Context
	paceCancel context.CancelFunc

	// initiator is New's; rd is the reader of conn (kept for ResumeOn).
	initiator bool
	rd        *bufio.Reader
	// resumeNonce, once ArmResume set it, is the nonce of the one resume
	// frame this end accepts (mu guards it).
	resumeNonce []byte
}

// New starts a Mux on conn, which it owns from then on. The two ends
// must differ in initiator: the initiator opens odd channel ids, the
// other even ones. Each end's first frame is its hello, so ends built or
// configured apart fail at once with ErrMismatch.
func New(conn Conn, cfg Config, initiator bool) (*Mux, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return newMux(conn, nil, cfg, initiator, cfg.newPacer())
}

// newMux is New with the reader's pacer given (nil: no bound) and the
// reader of conn, rd (nil: a new one).
func newMux(conn Conn, rd *bufio.Reader, cfg Config, initiator bool, pace pacer) (*Mux, error) {
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("stream: its connection takes no deadline, so closing it may not end a pending read (a blocking file? open it non-blocking): %w", err)
	}
	m := &Mux{
		conn: conn, cfg: cfg,
		wsem:  make(chan struct{}, 1),
		wbuf:  make([]byte, headerLen+max(cfg.MaxPayload, helloLen)),
		base:  time.Now(),
		chans: map[uint32]*Channel{}, owing: map[*Channel]struct{}{},
		freed:  make(chan struct{}),
		nextID: 2, peerNext: 1,
		accepted:  make(chan *Channel, cfg.MaxChannels),
		flush:     make(chan struct{}, 1),
		done:      make(chan struct{}),
		pace:      pace,
		initiator: initiator,
		rd:        rd,
	}
	if m.rd == nil {
		m.rd = bufio.NewReaderSize(conn, 64<<10)
	}
	m.paceCtx, m.paceCancel = context.WithCancel(context.Background())
	if initiator {
		m.nextID, m.peerNext = 1, 2
	}
	m.wtimer = time.AfterFunc(time.Hour, m.writeTimedOut)
	m.wtimer.Stop()
	// wsem starts empty (locked): the flusher writes the hello first.
	go m.readLoop()
	go m.flushLoop()
	return m, nil
}

// Done is closed once the stream has ended; Err then says why.
func (m *Mux) Done() <-chan struct{} { return m.done }

// Err is why the stream ended (ErrClosed, ErrHungUp, a broken rule
// matching ErrProtocol, ErrMismatch, a failed read or write), or nil.
func (m *Mux) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close ends the stream and every channel on it, and returns what
// closing its connection returned.
func (m *Mux) Close() error {
	return m.fail(ErrClosed)
}

// fail ends the stream with cause, once: conn is closed, which unblocks
// its reader and writers, and every waiting channel is woken. It returns
// conn's Close error to the call that closed it.
func (m *Mux) fail(cause error) error {
	if !m.end(cause) {
		return nil
	}
	m.wtimer.Stop()
	err := m.conn.Close()
	m.wakeAll()
	if err != nil {
		return fmt.Errorf("closing the stream: %w", err)
	}
	return nil
}

// end marks the stream ended with cause, once (false if it had ended
// already), leaving its connection open.
func (m *Mux) end(cause error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false
	}
	m.err = cause
	close(m.done)
	m.paceCancel()
	return true
}

// wakeAll wakes every waiter on the stream's channels, once it ended.
func (m *Mux) wakeAll() {
	m.mu.Lock()
	chans := make([]*Channel, 0, len(m.chans))
	for _, ch := range m.chans {
		chans = append(chans, ch)
	}
	m.mu.Unlock()
	for _, ch := range chans {
		ch.wake()
	}
}

// Open opens a channel to the peer, which Accept hands it.
func (m *Mux) Open() (*Channel, error) {
	if err := m.lock(time.Time{}); err != nil {
		return nil, fmt.Errorf("opening a channel: %w", err)
	}
	defer m.unlock()
	m.mu.Lock()
	if err := m.openable(); err != nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("opening a channel: %w", err)
	}
	ch := newChannel(m, m.nextID, true)
	m.chans[ch.id] = ch
	m.nextID += 2
	m.ours++
	m.mu.Unlock()
	if err := m.writeLocked(header{typ: frameOpen, id: ch.id}, nil); err != nil {
		return nil, fmt.Errorf("opening a channel: %w", err)
	}
	return ch, nil
}

// openable says why we may not open a channel now, if so; mu is held.
func (m *Mux) openable() error {
	switch {
	case m.err != nil:
		return m.err
	case m.nextID > 1<<31:
		return errors.New("the stream's channel ids are used up")
	case m.ours < m.cfg.MaxChannels:
		return nil
	}
	return fmt.Errorf("%d channels are open, the most one end may have (%d of them closed here and waiting for the peer's close or stop)", m.ours, m.waitingLocked())
}

// waitingLocked counts our channels this end closed and stopped whose
// peer still owes its close or stop; mu is held.
func (m *Mux) waitingLocked() int {
	waiting := 0
	for _, ch := range m.chans {
		if ch.ours && ch.doneHere() {
			waiting++
		}
	}
	return waiting
}

// OwedFor counts this end's channels whose close or stop the peer has
// owed for at least d (Slots' waiting, less those closed here lately): a
// close in flight is not one, so a protocol above can tell a peer that
// keeps slots back from a slow one.
func (m *Mux) OwedFor(d time.Duration) int {
	by := time.Now().Add(-d)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ch := range m.chans {
		if ch.ours && ch.doneBefore(by) {
			n++
		}
	}
	return n
}

// MaxChannels is the most channels each end may have open at once (its
// Config's).
func (m *Mux) MaxChannels() int { return m.cfg.MaxChannels }

// Slots says how many more channels this end may open now, and how many
// of its slots are held only by the peer: channels closed and stopped
// here whose close or stop the peer still owes. A peer that keeps those
// back holds this end's slots; the protocol above decides when that is
// a breach.
func (m *Mux) Slots() (free, waiting int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.MaxChannels - m.ours, m.waitingLocked()
}

// WaitSlots waits until this end may open n more channels, until by or
// the stream's end: os.ErrDeadlineExceeded, or the stream's error. It
// reserves nothing: a caller that opens concurrently with others must
// serialise its check and its opens.
func (m *Mux) WaitSlots(n int, by time.Time) error {
	var expired <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		expired = t.C
	}
	for {
		m.mu.Lock()
		free, freed, err := m.cfg.MaxChannels-m.ours, m.freed, m.err
		m.mu.Unlock()
		switch {
		case err != nil:
			return fmt.Errorf("waiting for %d free channels: %w", n, err)
		case free >= n:
			return nil
		}
		select {
		case <-freed:
		case <-m.done:
		case <-expired:
			return fmt.Errorf("waiting for %d free channels (%d free): %w", n, free, os.ErrDeadlineExceeded)
		}
	}
}

// Accept returns the next channel the peer opened, waiting while ctx
// allows.
func (m *Mux) Accept(ctx context.Context) (*Channel, error) {
	select {
	case ch := <-m.accepted:
		return ch, nil
	case <-m.done:
		return nil, fmt.Errorf("accepting a channel: %w", m.Err())
	case <-ctx.Done():
		return nil, fmt.Errorf("accepting a channel: %w", ctx.Err())
	}
}

// lock takes the right to write a frame, waiting until by (no bound if
// zero) or the stream's end.
func (m *Mux) lock(by time.Time) error {
	err := acquire(m.wsem, by, m.done)
	if errors.Is(err, errEnded) {
		return m.Err()
	}
	return err
}

// unlock gives back the right to write a frame.
func (m *Mux) unlock() { m.wsem <- struct{}{} }

// write writes one frame whole, waiting for the stream until by (no
// bound if zero).
func (m *Mux) write(h header, payload []byte, by time.Time) error {
	if err := m.lock(by); err != nil {
		return err
	}
	defer m.unlock()
	return m.writeLocked(h, payload)
}

// writeLocked writes one frame with the write lock held, in one Write,
// within WriteTimeout.
func (m *Mux) writeLocked(h header, payload []byte) error {
	select {
	case <-m.done:
		return m.Err()
	default:
	}
	putHeader(m.wbuf, h)
	n := headerLen + copy(m.wbuf[headerLen:], payload)
	m.writing.Store(int64(time.Since(m.base)) + 1)
	m.wtimer.Reset(m.cfg.WriteTimeout)
	_, err := m.conn.Write(m.wbuf[:n])
	m.writing.Store(0)
	m.wtimer.Stop()
	if err != nil {
		m.fail(fmt.Errorf("writing to the stream: %w", err)) //nolint:errcheck // the stream's cause is the write's error
		return m.Err()
	}
	return nil
}

// writeTimedOut ends the stream when a write has been pending for
// WriteTimeout on the monotonic clock. The timer may fire just as a write
// ends, or for a write since replaced by a newer one: it then waits again
// for what is left of the newer write's time.
func (m *Mux) writeTimedOut() {
	start := m.writing.Load()
	if start == 0 {
		return
	}
	if left := m.cfg.WriteTimeout - (time.Since(m.base) - time.Duration(start-1)); left > 0 {
		m.wtimer.Reset(left)
		return
	}
	m.fail(fmt.Errorf("%w: it read nothing for %v", ErrProtocol, m.cfg.WriteTimeout)) //nolint:errcheck // the cause says why
}

// readLoop reads frames until the stream ends or breaks a rule.
func (m *Mux) readLoop() {
	r := m.rd
	var hb [headerLen]byte
	payload := make([]byte, max(m.cfg.MaxPayload, helloLen, ResumeNonceLen))
	for first := true; ; first = false {
		h, p, err := m.readFrame(r, hb[:], payload)
		if err == nil {
			err = m.paced(len(p))
		}
		if err == nil && !first && h.typ == frameResume {
			if err = m.resumed(h, p); err == nil {
				return
			}
		} else if err == nil && (first || h.typ == frameHello) {
			err = m.greeted(h, p, first)
		} else if err == nil {
			err = m.handle(h, p)
		}
		if err != nil {
			m.fail(err) //nolint:errcheck // err says why
			return
		}
	}
}

// paced counts a frame with n payload bytes against ReadRate, and waits
// once a chunk's worth is owed: a peer flooding small frames then waits
// on its own writes, as the stream's reader takes no more. Waiting a
// chunk at a time rather than a frame at a time spares the reader a
// timer's sleep and wake-up per small frame, which would cost more than
// the frame.
func (m *Mux) paced(n int) error {
	if m.pace == nil {
		return nil
	}
	m.paceDebt += m.cfg.frameCost(n)
	if m.paceDebt < m.cfg.paceChunk() {
		return nil
	}
	debt := m.paceDebt
	m.paceDebt = 0
	if err := m.pace.WaitN(m.paceCtx, debt); err != nil {
		return fmt.Errorf("pacing the stream's reader: %w", err)
	}
	return nil
}

// readFrame reads and parses one frame; p is its payload, in payload.
func (m *Mux) readFrame(r io.Reader, hb, payload []byte) (header, []byte, error) {
	if _, err := io.ReadFull(r, hb); err != nil {
		return header{}, nil, readError(err, false)
	}
	h, err := parseHeader(hb, m.cfg.MaxPayload)
	if err != nil {
		return h, nil, err
	}
	p := payload[:0]
	if h.typ == frameData || h.typ == frameHello || h.typ == frameResume {
		p = payload[:h.n]
		if _, err := io.ReadFull(r, p); err != nil {
			return h, nil, readError(err, true)
		}
	}
	return h, p, nil
}

// greeted checks the peer's hello, which must come first and once.
func (m *Mux) greeted(h header, p []byte, first bool) error {
	if !first {
		return fmt.Errorf("%w: a second hello", ErrProtocol)
	}
	return checkHello(h, p, m.cfg)
}

// readError says why reading the stream stopped.
func readError(err error, inFrame bool) error {
	switch {
	case errors.Is(err, io.EOF) && !inFrame:
		return ErrHungUp
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the stream ended inside a frame", ErrProtocol)
	}
	return fmt.Errorf("reading the stream: %w", err)
}

// handle applies one well-formed frame.
func (m *Mux) handle(h header, p []byte) error {
	if h.typ == frameOpen {
		return m.peerOpened(h.id)
	}
	ch, err := m.lookup(h)
	if err != nil {
		return err
	}
	switch h.typ {
	case frameData:
		return ch.received(p)
	case frameCredit:
		return ch.credited(h.n)
	case frameStop:
		return ch.remoteStopped()
	default:
		return ch.remoteClosed()
	}
}

// peerOpened admits a channel the peer opened: the next id of its
// parity, within its MaxChannels.
func (m *Mux) peerOpened(id uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case id != m.peerNext:
		return fmt.Errorf("%w: it opened channel %d where %d was next", ErrProtocol, id, m.peerNext)
	case id > 1<<31:
		return fmt.Errorf("%w: it opened channel %d, past the last id %d", ErrProtocol, id, uint32(1<<31))
	case m.theirs >= m.cfg.MaxChannels:
		return fmt.Errorf("%w: it opened more than %d channels at once", ErrProtocol, m.cfg.MaxChannels)
	}
	ch := newChannel(m, id, false)
	// accepted has room: a channel not yet accepted was never closed
	// here, so it still counts in theirs, which is below MaxChannels.
	m.accepted <- ch
	m.chans[id] = ch
	m.peerNext += 2
	m.theirs++
	return nil
}

// lookup finds the open channel a frame is for. Every frame for a
// channel no longer open is a breach, credit too: a channel is forgotten
// only after the peer's stop, and an honest peer sends no credit after
// its stop (see Channel.credited).
func (m *Mux) lookup(h header) (*Channel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch := m.chans[h.id]; ch != nil {
		return ch, nil
	}
	return nil, fmt.Errorf("%w: %s frame for channel %d, which is not open", ErrProtocol, frameName(h.typ), h.id)
}

// forget frees the slot of a channel both ends closed and stopped; mu is
// held.
func (m *Mux) forget(ch *Channel) {
	if m.chans[ch.id] != ch {
		return
	}
	delete(m.chans, ch.id)
	if ch.ours {
		m.ours--
		close(m.freed)
		m.freed = make(chan struct{})
	} else {
		m.theirs--
	}
}

// owe queues ch's credit or stop for the flusher.
func (m *Mux) owe(ch *Channel) {
	m.mu.Lock()
	m.owing[ch] = struct{}{}
	m.mu.Unlock()
	select {
	case m.flush <- struct{}{}:
	default:
	}
}

// flushLoop writes our hello, then the credit and stops channels'
// readers give. It runs apart from the reader, which must never wait for
// the stream's writers: two ends flooding each other would otherwise
// each wait for the other to read.
func (m *Mux) flushLoop() {
	err := m.writeLocked(header{typ: frameHello, id: version, n: helloLen}, hello(m.cfg))
	m.unlock()
	for err == nil {
		select {
		case <-m.done:
			return
		case <-m.flush:
		}
		m.mu.Lock()
		owing := m.owing
		m.owing = map[*Channel]struct{}{}
		m.mu.Unlock()
		for ch := range owing {
			if err = m.flushOne(ch); err != nil {
				return
			}
		}
	}
}

// flushOne writes ch's credit, then its stop if its reader is done.
func (m *Mux) flushOne(ch *Channel) error {
	if n := ch.takeCredit(); n > 0 {
		if err := m.write(header{typ: frameCredit, id: ch.id, n: n}, nil, time.Time{}); err != nil {
			return err
		}
	}
	return ch.sendStop()
}

// errEnded is acquire's word for the stream's end.
var errEnded = errors.New("the stream ended")

// acquire takes sem's one slot, waiting until by (no bound if zero) or
// done: os.ErrDeadlineExceeded, or errEnded.
func acquire(sem chan struct{}, by time.Time, done <-chan struct{}) error {
	select {
	case <-sem:
		return nil
	default:
	}
	var expired <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-sem:
		return nil
	case <-done:
		return errEnded
	case <-expired:
		return os.ErrDeadlineExceeded
	}
}
