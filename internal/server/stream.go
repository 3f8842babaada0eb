package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// event is one line of an exec stream (application/x-ndjson):
// {"type":"stdout","data":"..."}, {"type":"stderr","data":"..."}, then
// exactly one {"type":"result","result":{...}} or
// {"type":"error","error":{"code":...,"message":...}}.
type event struct {
	Type   string       `json:"type"`
	Data   string       `json:"data,omitempty"`
	Result *spec.Result `json:"result,omitempty"`
	Error  *errorDetail `json:"error,omitempty"`
}

// ndjsonStream writes an exec's events as they happen, one JSON line per
// chunk of output, flushed at once so a client sees output live. stdout
// and stderr are written from different goroutines; the mutex keeps each
// line whole and in the order the chunks arrived.
//
// The status line is sent with the first event. Until then an error (the
// session is busy, missing, over a limit) can still be answered with its
// proper status and JSON error body.
//
// Each event must reach the client within timeout. One that does not, or
// any write error, breaks the stream: every later event is dropped
// unwritten, so the exec's output never blocks again, and onBreak is
// called to kill the exec.
type ndjsonStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	onBreak func()

	mu      sync.Mutex
	started bool
	broken  bool
	// pending holds the start of a UTF-8 sequence a chunk ended in the
	// middle of, per stream, to be completed by the next chunk.
	pending map[string][]byte
}

func newNDJSONStream(w http.ResponseWriter, timeout time.Duration, onBreak func()) *ndjsonStream {
	return &ndjsonStream{
		w: w, rc: http.NewResponseController(w), timeout: timeout, onBreak: onBreak,
		pending: map[string][]byte{},
	}
}

// live is the sandbox.Stream that feeds this stream.
func (n *ndjsonStream) live() sandbox.Stream {
	return sandbox.Stream{Stdout: chunkWriter{n, "stdout"}, Stderr: chunkWriter{n, "stderr"}}
}

// chunkWriter turns each Write into one event of its type.
type chunkWriter struct {
	n   *ndjsonStream
	typ string
}

// Write never fails, and never blocks once the stream is broken: a client
// that went away or stopped reading is noticed through the exec's
// context, which the Manager watches to kill the exec, and an error here
// could cut short capture of the Result the exec still needs.
func (c chunkWriter) Write(p []byte) (int, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	buf := append(c.n.pending[c.typ], p...)
	cut := spec.CompleteUTF8(buf)
	c.n.pending[c.typ] = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		c.n.emit(event{Type: c.typ, Data: string(buf[:cut])})
	}
	return len(p), nil
}

// finish sends the final event: the Result, or the error that stopped the
// exec. It reports false when nothing was sent yet and err should rather
// be answered as a plain JSON error with its status.
func (n *ndjsonStream) finish(res spec.Result, err error) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, typ := range []string{"stdout", "stderr"} {
		if rest := n.pending[typ]; len(rest) > 0 {
			n.emit(event{Type: typ, Data: string(rest)})
			n.pending[typ] = nil
		}
	}
	if err != nil {
		if !n.started {
			return false
		}
		ae := toAPIError(err)
		n.emit(event{Type: "error", Error: &errorDetail{ae.code, ae.message}})
		return true
	}
	n.emit(event{Type: "result", Result: &res})
	return true
}

// emit writes one event; n.mu is held.
func (n *ndjsonStream) emit(e event) {
	if n.broken {
		return
	}
	if !n.started {
		n.started = true
		h := n.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
	if err := n.write(e); err != nil {
		n.broken = true
		n.onBreak()
	}
}

// write sends one event line and flushes it within n.timeout. A writer
// that cannot flush or take deadlines (a test's recorder) is written to
// without.
func (n *ndjsonStream) write(e event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := supported(n.rc.SetWriteDeadline(time.Now().Add(n.timeout))); err != nil {
		return err
	}
	if _, err := n.w.Write(append(line, '\n')); err != nil {
		return err
	}
	if err := supported(n.rc.Flush()); err != nil {
		return err
	}
	return supported(n.rc.SetWriteDeadline(time.Time{}))
}

// supported is err, unless it says the writer cannot do what was asked.
func supported(err error) error {
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
