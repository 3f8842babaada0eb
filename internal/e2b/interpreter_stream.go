package e2b

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Timing of an execution's stream.
const (
	// execKeepaliveEvery is how long a stream may stay silent before a
	// keepalive line, as E2B's server sends one every 5 s: proxies and
	// the client then see the connection alive through a long quiet run.
	execKeepaliveEvery = 5 * time.Second
	// execPartialAfter is how long a line without its newline waits for the
	// rest before it is sent as it is (a progress bar, a prompt).
	execPartialAfter = 200 * time.Millisecond
	// execMaxPartial is the most of one unfinished line held back.
	execMaxPartial = 32 << 10
	// execLineTimeout bounds the write and flush of one line; a client
	// that does not take it breaks the stream and ends the execution.
	execLineTimeout = 30 * time.Second
)

// execStream writes one execution's NDJSON lines as they happen. The
// status line goes out with the first line, so a refusal that comes
// before any output (the sandbox is gone, pacing) can still be answered
// with its status. Every line is one JSON value and a newline, never a
// blank line: the SDK parses each line it reads with JSON.parse.
//
// The Manager's output pumps write stdout and stderr from their own
// goroutines and the ticker writes keepalives from another; mu keeps each
// line whole. Once a write fails or times out the stream is broken: later
// lines are dropped unwritten, so output never blocks on a gone client,
// and onBreak ends the execution.
type execStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	onBreak func()
	// first are the lines that go out before any other (the execution
	// count), once the stream starts.
	first []any

	mu      sync.Mutex
	started bool
	broken  bool
	last    time.Time // when the last line was written
	out     execLineBuffer
	errOut  execLineBuffer
}

func newExecStream(w http.ResponseWriter, onBreak func(), first ...any) *execStream {
	s := &execStream{w: w, rc: http.NewResponseController(w), onBreak: onBreak, first: first, last: time.Now()}
	s.out.typ, s.errOut.typ = "stdout", "stderr"
	return s
}

// execLineBuffer holds the unfinished line of one output stream.
type execLineBuffer struct {
	typ   string
	buf   []byte
	since time.Time // when buf began to wait
}

// execLogLine is a stdout or stderr line.
type execLogLine struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// execMarkLine is a line with only a type: keepalive, end_of_execution.
type execMarkLine struct {
	Type string `json:"type"`
}

// execOutput feeds one output stream of an execution into the stream.
type execOutput struct {
	s *execStream
	b *execLineBuffer
}

// Write sends every finished line of p (with what was held of the line
// before) as one line of its type and holds the unfinished rest. It never
// fails, and never blocks once the stream is broken: a gone client is
// noticed through the execution's context, and an error here could cut
// short the Result the execution still needs.
func (sw execOutput) Write(p []byte) (int, error) {
	s := sw.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b := sw.b
	if len(b.buf) == 0 {
		b.since = time.Now()
	}
	b.buf = append(b.buf, p...)
	if i := bytes.LastIndexByte(b.buf, '\n'); i >= 0 {
		s.emit(execLogLine{b.typ, string(b.buf[:i+1])})
		b.buf = append(b.buf[:0], b.buf[i+1:]...)
		b.since = time.Now()
	}
	if len(b.buf) >= execMaxPartial {
		s.flushPartial(b)
	}
	return len(p), nil
}

// flushPartial sends what b holds up to its last whole UTF-8 character;
// s.mu is held.
func (s *execStream) flushPartial(b *execLineBuffer) {
	cut := spec.CompleteUTF8(b.buf)
	if cut == 0 {
		cut = len(b.buf) // never whole: JSON turns it into U+FFFD
	}
	if cut > 0 {
		s.emit(execLogLine{b.typ, string(b.buf[:cut])})
		b.buf = append(b.buf[:0], b.buf[cut:]...)
		b.since = time.Now()
	}
}

// tick sends the unfinished lines that waited execPartialAfter, and a
// keepalive once the stream has been silent for execKeepaliveEvery. Until
// the stream has started, a keepalive starts it: a run that prints
// nothing for that long still shows the client it is alive.
func (s *execStream) tick(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range []*execLineBuffer{&s.out, &s.errOut} {
		if len(b.buf) > 0 && now.Sub(b.since) >= execPartialAfter {
			s.flushPartial(b)
		}
	}
	if now.Sub(s.last) >= execKeepaliveEvery {
		s.emit(execMarkLine{"keepalive"})
	}
}

// startTicks calls tick every execPartialAfter/2 until the returned
// stop is called; stop returns once the last tick has, so nothing is
// written after the stream's end or after the handler returned.
func (s *execStream) startTicks() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(execPartialAfter / 2)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				s.tick(now)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// finish sends what the output streams still hold, then lines (results,
// the error) and end_of_execution.
func (s *execStream) finish(lines ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range []*execLineBuffer{&s.out, &s.errOut} {
		for len(b.buf) > 0 {
			s.flushPartial(b)
		}
	}
	for _, l := range lines {
		s.emit(l)
	}
	s.emit(execMarkLine{"end_of_execution"})
}

// hasStarted says whether the status line went out.
func (s *execStream) hasStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// emit writes one line, starting the stream first; s.mu is held.
func (s *execStream) emit(line any) {
	if s.broken {
		return
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
		for _, l := range s.first {
			s.emit(l)
		}
		if s.broken {
			return
		}
	}
	if err := s.write(line); err != nil {
		s.broken = true
		s.onBreak()
	}
}

// write sends one line and flushes it within execLineTimeout. A writer
// that cannot flush or take deadlines (a test's recorder) is written to
// without.
func (s *execStream) write(line any) error {
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	s.last = time.Now()
	if err := ignoreUnsupported(s.rc.SetWriteDeadline(s.last.Add(execLineTimeout))); err != nil {
		return err
	}
	if _, err := s.w.Write(append(b, '\n')); err != nil {
		return err
	}
	if err := ignoreUnsupported(s.rc.Flush()); err != nil {
		return err
	}
	return ignoreUnsupported(s.rc.SetWriteDeadline(time.Time{}))
}

// ignoreUnsupported is err, unless it says the writer cannot do what was asked.
func ignoreUnsupported(err error) error {
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
