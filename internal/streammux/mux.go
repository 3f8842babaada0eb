package streammux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is a stream or channel closed by this end.
var ErrClosed = errors.New("the stream is closed")

// errHungUp is a peer that closed the stream between frames.
var errHungUp = errors.New("the peer closed the stream")

// Mux carries channels over one byte stream. One goroutine reads the
// stream and never writes to it, another writes the credit the readers
// of channels give back; frames are written whole under one lock, so a
// writer blocked on a channel's credit or on the stream never holds up
// the reading end, and no frame waits behind more than one data frame.
type Mux struct {
	conn io.ReadWriteCloser
	cfg  Config

	// wmu serialises frame writes (and hands out the ids of our opens,
	// so they go out in order); wbuf, wtimer and writing are its.
	wmu    sync.Mutex
	wbuf   []byte
	wtimer *time.Timer
	// writing is when the write in progress started (UnixNano), or 0.
	writing atomic.Int64

	mu sync.Mutex
	// chans are the open channels, ours and the peer's.
	chans map[uint32]*Channel
	// nextID is the id of our next open; peerNext the peer's.
	nextID, peerNext uint32
	// ours and theirs count the open channels each end opened.
	ours, theirs int
	// owing are channels whose reader has credit to give back.
	owing map[*Channel]struct{}
	err   error

	accepted chan *Channel
	flush    chan struct{}
	done     chan struct{}
}

// New starts a Mux on conn, which it owns from then on. conn's Close
// must unblock its pending Read and Write (a net.Conn, or an *os.File
// of a non-blocking descriptor). The two ends must differ in initiator:
// the initiator opens odd channel ids, the other even ones.
func New(conn io.ReadWriteCloser, cfg Config, initiator bool) (*Mux, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := &Mux{
		conn: conn, cfg: cfg,
		wbuf:  make([]byte, headerLen+cfg.MaxPayload),
		chans: map[uint32]*Channel{}, owing: map[*Channel]struct{}{},
		nextID: 2, peerNext: 1,
		accepted: make(chan *Channel, cfg.MaxChannels),
		flush:    make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if initiator {
		m.nextID, m.peerNext = 1, 2
	}
	m.wtimer = time.AfterFunc(time.Hour, m.writeTimedOut)
	m.wtimer.Stop()
	go m.readLoop()
	go m.flushLoop()
	return m, nil
}

// Done is closed once the stream has ended; Err then says why.
func (m *Mux) Done() <-chan struct{} { return m.done }

// Err is why the stream ended (ErrClosed, the peer's hang-up, a broken
// rule matching ErrProtocol, a failed read or write), or nil.
func (m *Mux) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close ends the stream and every channel on it.
func (m *Mux) Close() error {
	m.fail(ErrClosed)
	return nil
}

// fail ends the stream with cause, once: conn is closed, which unblocks
// its reader and writers, and every waiting channel is woken.
func (m *Mux) fail(cause error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = cause
	close(m.done)
	chans := make([]*Channel, 0, len(m.chans))
	for _, ch := range m.chans {
		chans = append(chans, ch)
	}
	m.mu.Unlock()
	m.wtimer.Stop()
	m.conn.Close() //nolint:errcheck // the stream is over either way; cause says why
	for _, ch := range chans {
		ch.wake()
	}
}

// Open opens a channel to the peer, which Accept hands it.
func (m *Mux) Open() (*Channel, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("opening a channel: %w", m.err)
	}
	if m.ours >= m.cfg.MaxChannels {
		m.mu.Unlock()
		return nil, fmt.Errorf("opening a channel: %d channels are open, the most one end may have", m.ours)
	}
	if m.nextID > 1<<31 {
		m.mu.Unlock()
		return nil, errors.New("opening a channel: the stream's channel ids are used up")
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

// write writes one frame whole.
func (m *Mux) write(h header, payload []byte) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return m.writeLocked(h, payload)
}

// writeLocked writes one frame with wmu held, in one Write, within
// WriteTimeout.
func (m *Mux) writeLocked(h header, payload []byte) error {
	select {
	case <-m.done:
		return m.Err()
	default:
	}
	putHeader(m.wbuf, h)
	n := headerLen + copy(m.wbuf[headerLen:], payload)
	m.writing.Store(time.Now().UnixNano())
	m.wtimer.Reset(m.cfg.WriteTimeout)
	_, err := m.conn.Write(m.wbuf[:n])
	m.writing.Store(0)
	m.wtimer.Stop()
	if err != nil {
		err = fmt.Errorf("writing to the stream: %w", err)
		m.fail(err)
		return m.Err()
	}
	return nil
}

// writeTimedOut ends the stream when a write has been pending for
// WriteTimeout: the timer may fire just as a write ends, so it checks.
func (m *Mux) writeTimedOut() {
	start := m.writing.Load()
	if start == 0 || time.Since(time.Unix(0, start)) < m.cfg.WriteTimeout {
		return
	}
	m.fail(fmt.Errorf("%w: it read nothing for %v", ErrProtocol, m.cfg.WriteTimeout))
}

// readLoop reads frames until the stream ends or breaks a rule.
func (m *Mux) readLoop() {
	r := bufio.NewReaderSize(m.conn, 64<<10)
	var hb [headerLen]byte
	payload := make([]byte, m.cfg.MaxPayload)
	for {
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			m.fail(readError(err, false))
			return
		}
		h, err := parseHeader(hb[:], m.cfg.MaxPayload)
		if err != nil {
			m.fail(err)
			return
		}
		p := payload[:0]
		if h.typ == frameData {
			p = payload[:h.n]
			if _, err := io.ReadFull(r, p); err != nil {
				m.fail(readError(err, true))
				return
			}
		}
		if err := m.handle(h, p); err != nil {
			m.fail(err)
			return
		}
	}
}

// readError says why reading the stream stopped.
func readError(err error, inFrame bool) error {
	switch {
	case errors.Is(err, io.EOF) && !inFrame:
		return errHungUp
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
	if ch == nil {
		return err
	}
	switch h.typ {
	case frameData:
		return ch.received(p)
	case frameCredit:
		return ch.credited(h.n)
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
	case m.theirs >= m.cfg.MaxChannels:
		return fmt.Errorf("%w: it opened more than %d channels at once", ErrProtocol, m.cfg.MaxChannels)
	}
	ch := newChannel(m, id, false)
	select {
	case m.accepted <- ch:
	default: // it holds MaxChannels, the most the peer may have open
		return fmt.Errorf("%w: it opened channel %d with %d channels unaccepted", ErrProtocol, id, len(m.accepted))
	}
	m.chans[id] = ch
	m.peerNext += 2
	m.theirs++
	return nil
}

// lookup finds the open channel a frame is for. A credit for a channel
// that was open and is no more is dropped (nil, nil): its peer may read
// our last bytes after it closed its side, and give them back.
func (m *Mux) lookup(h header) (*Channel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch := m.chans[h.id]; ch != nil {
		return ch, nil
	}
	if h.typ == frameCredit && m.wasOpen(h.id) {
		return nil, nil
	}
	return nil, fmt.Errorf("%w: %s frame for channel %d, which is not open", ErrProtocol, frameName(h.typ), h.id)
}

// wasOpen says id was opened by either end; mu is held.
func (m *Mux) wasOpen(id uint32) bool {
	if id%2 == m.nextID%2 {
		return id < m.nextID
	}
	return id < m.peerNext
}

// forget removes a channel closed both ways; mu is held.
func (m *Mux) forget(ch *Channel) {
	if m.chans[ch.id] != ch {
		return
	}
	delete(m.chans, ch.id)
	if ch.ours {
		m.ours--
	} else {
		m.theirs--
	}
}

// owe queues ch's credit for the flusher.
func (m *Mux) owe(ch *Channel) {
	m.mu.Lock()
	m.owing[ch] = struct{}{}
	m.mu.Unlock()
	select {
	case m.flush <- struct{}{}:
	default:
	}
}

// flushLoop writes the credit channels' readers have given back. It runs
// apart from the reader, which must never wait for the stream's writers:
// two ends flooding each other would otherwise each wait for the other to
// read.
func (m *Mux) flushLoop() {
	for {
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
			if n := ch.takeCredit(); n > 0 {
				if m.write(header{typ: frameCredit, id: ch.id, n: n}, nil) != nil {
					return
				}
			}
		}
	}
}
