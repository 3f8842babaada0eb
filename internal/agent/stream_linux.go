package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/streamrelay"
)

// The host's side of the stream transport (Frame.Stream, nsinit.Config
// .Stream): the control connection carries a streammux stream, the host
// its initiator. Channel 1 carries requests and events as the bare
// connection does; before each spawn the host opens a channel per fd of
// the process and relays between it and the fd it would have passed
// (each a pipe end the host made), so Exec, Spawn and the interpreters
// are the same above. Only the host opens channels: one the box opens is
// a breach, as is anything streammux refuses.

// streamControl makes the session's connection pollable, so that closing
// it ends the stream's pending read, and takes it over from f.Control,
// which is closed.
func (s *Session) streamControl() error {
	c, err := streamrelay.FileCopy(s.f.Control, "control stream")
	if err != nil {
		return fmt.Errorf("starting the control stream: %w", err)
	}
	old := s.f.Control
	s.f.Control = c
	if err := old.Close(); err != nil {
		s.log().Warn("closing the control connection's first descriptor", "err", err)
	}
	return nil
}

// readStreamEvents is readEvents over the stream. The box's first byte
// tells a JSON line (a refusal or a failed build, written before its
// agent started the stream) from the stream's hello; the stream is
// started only then, and its control channel opened.
func (s *Session) readStreamEvents(ready chan<- error, ctl *os.File) {
	var first [1]byte
	if _, err := io.ReadFull(ctl, first[:]); err != nil {
		s.finishEvents(ready, true, streamEnd(err))
		return
	}
	conn := &prefixed{Conn: ctl, first: first[0], pending: true}
	if first[0] == '{' {
		s.readLines(bufio.NewReaderSize(conn, maxEventLine), ready, true)
		return
	}
	ch, err := s.startStream(conn)
	if err != nil {
		s.finishEvents(ready, true, err)
		return
	}
	go s.serveGuestChannels()
	s.readLines(bufio.NewReaderSize(ch, maxEventLine), ready, false)
}

// startStream starts the stream on conn and opens the control channel,
// unless the session was closed meanwhile.
func (s *Session) startStream(conn streammux.Conn) (*streammux.Channel, error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.ctlClosed {
		return nil, ErrSessionEnded
	}
	mux, err := streammux.New(conn, streammux.DefaultConfig(), true)
	if err != nil {
		return nil, fmt.Errorf("starting the control stream: %w", err)
	}
	ctl, err := mux.Open()
	if err != nil {
		// the stream is gone either way
		_ = mux.Close()
		return nil, streamEnd(err)
	}
	s.mux, s.ctlCh = mux, ctl
	return ctl, nil
}

// streamEnd names why reading the box's stream stopped: its hang-up, a
// breach (streammux refused a frame: nsinit.ErrProtocol), or the error.
func streamEnd(err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, streammux.ErrHungUp), errors.Is(err, unix.ECONNRESET):
		return errHungUp
	case errors.Is(err, streammux.ErrProtocol), errors.Is(err, streammux.ErrMismatch):
		return fmt.Errorf("%w: %v", nsinit.ErrProtocol, err) //nolint:errorlint // the session's cause is ErrProtocol; the stream's rule is text
	}
	return fmt.Errorf("reading from the sandbox: %w", err)
}

// prefixed is a connection whose first byte was read already.
type prefixed struct {
	streammux.Conn
	first   byte
	pending bool
}

func (p *prefixed) Read(b []byte) (int, error) {
	if p.pending && len(b) > 0 {
		p.pending = false
		b[0] = p.first
		return 1, nil
	}
	return p.Conn.Read(b)
}
