package streammux

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"time"
)

// Taking a stream over after a checkpoint. A box saved whole (gVisor's
// runsc checkpoint) keeps its end of a stream in its memory, channels,
// credit and all, and finds it again on restore, while its connection is
// a new one from a new host that knows none of it. So the old stream is
// cut where both ends stood still, and a new one started on the same
// connection:
//
//   - Quiescing: each end writes its last frame on the old stream with
//     WriteLast, which keeps the stream's write lock for good after it:
//     every frame before it went out whole, nothing follows it. The host
//     writes its last request so, the agent its answer, and the agent
//     arms its end (ArmResume) with a nonce the host chose before it
//     answers. The host reads the answer (so the agent's reader stands
//     at a frame boundary after the host's last frame, and nothing of
//     the agent's is half written) and saves the box.
//   - The cut: no frame is half written on either side, by the above.
//     Whatever still sat in the old connection (the agent's frames the
//     old host left unread) went with it; the old channels are the old
//     host's loss, not the new one's.
//   - Resuming: the new host writes a resume frame carrying the nonce
//     (WriteResume) and then starts a new stream, its hello first. The
//     armed end's reader, which stood between frames, reads the resume
//     frame, ends the old stream with ErrResumed without closing the
//     connection, and ResumeOn starts a new Mux on it with what the reader
//     already read past the resume frame. A resume frame on a stream not
//     armed, with another nonce, or first on a stream is a breach, as a
//     second hello is; bytes of a frame cut in two would make the resume
//     frame unreadable, so a cut that was not quiesced fails closed.

// ErrResumed is the cause of a stream a resume frame ended: its
// connection lives on for the Mux ResumeOn starts on it.
var ErrResumed = errors.New("the stream was cut by a checkpoint and taken over by a resumed peer")

// ArmResume makes this end accept one resume frame carrying nonce
// (ResumeNonceLen bytes), which ends the stream with ErrResumed and
// leaves its connection to Resume. Call it before telling the peer the
// stream is quiesced.
func (m *Mux) ArmResume(nonce []byte) error {
	if len(nonce) != ResumeNonceLen {
		return fmt.Errorf("arming the stream's resume: a nonce of %d bytes, not %d", len(nonce), ResumeNonceLen)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resumeNonce = append([]byte(nil), nonce...)
	return nil
}

// resumed takes a resume frame (h) and its nonce p: on an armed end
// with its nonce, the stream ends with ErrResumed, its connection left
// open. A resume of another version is refused as a hello of one is.
func (m *Mux) resumed(h header, p []byte) error {
	m.mu.Lock()
	nonce := m.resumeNonce
	m.mu.Unlock()
	switch {
	case nonce == nil:
		return fmt.Errorf("%w: a resume frame on a stream that was not quiesced for a checkpoint", ErrProtocol)
	case h.id != version:
		return fmt.Errorf("%w: a resume frame of version %d, ours %d; restore with a warden of the checkpoint's version", ErrMismatch, h.id, version)
	case subtle.ConstantTimeCompare(nonce, p) != 1:
		return fmt.Errorf("%w: a resume frame with another nonce than the checkpoint's", ErrProtocol)
	}
	if m.end(ErrResumed) {
		m.wtimer.Stop()
		m.wakeAll()
	}
	return nil
}

// WriteLast writes p (1 to MaxPayload bytes) on ch as this end's last
// frame on the stream: once it returns nil, p went out whole after every
// frame written before it, and no frame of this end follows it (later
// writes wait until the stream ends). by bounds the wait for credit and
// for the stream.
func (ch *Channel) WriteLast(p []byte, by time.Time) error {
	m := ch.m
	if len(p) == 0 || len(p) > m.cfg.MaxPayload {
		return fmt.Errorf("writing the last frame on channel %d: %d bytes, not 1 to %d", ch.id, len(p), m.cfg.MaxPayload)
	}
	if err := acquire(ch.wsem, by, m.done); err != nil {
		return ch.writeError(err)
	}
	// ch.wsem stays taken: nothing follows on ch either.
	ch.mu.Lock()
	for ch.credit < len(p) && !ch.closing && !ch.peerStopped && !ch.ended() && !passed(by) {
		if ch.writeBy != by {
			ch.writeBy = by
			ch.writeTimer = ch.arm(ch.writeTimer, by)
		}
		ch.wait()
	}
	short := ch.credit < len(p)
	if !short {
		ch.credit -= len(p)
	}
	ch.mu.Unlock()
	if short {
		return fmt.Errorf("writing the last frame on channel %d: %d bytes of credit wanted, and the channel ended or the wait ran out", ch.id, len(p))
	}
	if err := m.lock(by); err != nil {
		return ch.writeError(err)
	}
	// m.wsem stays taken for good: that is what makes the frame the last.
	return m.writeLocked(header{typ: frameData, id: ch.id, n: uint32(len(p))}, p)
}

// WriteResume writes the resume frame with nonce on w, the connection a
// restored peer's quiesced stream stands on, before New starts the new
// stream there.
func WriteResume(w io.Writer, nonce []byte) error {
	if len(nonce) != ResumeNonceLen {
		return fmt.Errorf("resuming the stream: a nonce of %d bytes, not %d", len(nonce), ResumeNonceLen)
	}
	b := make([]byte, headerLen, headerLen+ResumeNonceLen)
	putHeader(b, header{typ: frameResume, id: version, n: ResumeNonceLen})
	if _, err := w.Write(append(b, nonce...)); err != nil {
		return fmt.Errorf("resuming the stream: %w", err)
	}
	return nil
}

// ResumeOn starts a new stream on conn, a new descriptor of the
// connection of old, which a resume frame ended (ErrResumed), with the
// bytes old's reader had read past that frame, and the same Config and
// side; conn nil is old's own descriptor, else old's is closed. The new
// stream's first frames are each end's hello again; old's channels are
// gone with it. A box restored by gVisor
// (runsc 2022-12-19) needs it: a descriptor registered with the poller
// before the checkpoint hears of no readiness after the restore (bytes
// sit unread in its socket), while one registered after it does.
func ResumeOn(old *Mux, conn Conn) (*Mux, error) {
	switch err := old.Err(); {
	case err == nil:
		return nil, errors.New("resuming the stream: it was not ended by a resume frame (it is live)")
	case !errors.Is(err, ErrResumed):
		return nil, fmt.Errorf("resuming the stream: it was not ended by a resume frame: %w", err)
	}
	if conn == nil {
		return newMux(old.conn, old.rd, old.cfg, old.initiator, old.cfg.newPacer())
	}
	// old.rd holds what was read past the resume frame; the rest comes
	// from conn, which reads the same connection.
	held, err := old.rd.Peek(old.rd.Buffered())
	if err != nil {
		return nil, fmt.Errorf("resuming the stream: %w", err)
	}
	rd := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(held), conn), 64<<10)
	m, err := newMux(conn, rd, old.cfg, old.initiator, old.cfg.newPacer())
	if err != nil {
		return nil, err
	}
	if err := old.conn.Close(); err != nil {
		_ = m.Close() // the new stream is given up with the old descriptor's failure
		return nil, fmt.Errorf("resuming the stream: closing the old descriptor: %w", err)
	}
	return m, nil
}
