package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"unicode/utf8"

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
type ndjsonStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	started bool
	failed  bool
	// pending holds the start of a UTF-8 sequence a chunk ended in the
	// middle of, per stream, to be completed by the next chunk.
	pending map[string][]byte
}

func newNDJSONStream(w http.ResponseWriter) *ndjsonStream {
	return &ndjsonStream{w: w, rc: http.NewResponseController(w), pending: map[string][]byte{}}
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

// Write never fails: a client that went away is noticed through the
// request's context, which the Manager watches to kill the exec, and an
// error here could cut short capture of the Result the exec still needs.
func (c chunkWriter) Write(p []byte) (int, error) {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	buf := append(c.n.pending[c.typ], p...)
	cut := completeUTF8(buf)
	c.n.pending[c.typ] = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		c.n.emit(event{Type: c.typ, Data: string(buf[:cut])})
	}
	return len(p), nil
}

// completeUTF8 is the length of buf without a trailing, incomplete UTF-8
// sequence (at most 3 bytes), so a character split across two chunks is
// sent whole. Bytes that can never be valid UTF-8 are left in place; JSON
// encoding replaces them with U+FFFD.
func completeUTF8(buf []byte) int {
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(buf[i]) {
			continue
		}
		if !utf8.FullRune(buf[i:]) {
			return i
		}
		break
	}
	return len(buf)
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

// emit writes one event and flushes it; n.mu is held. After a write
// error the client is gone and the rest is dropped.
func (n *ndjsonStream) emit(e event) {
	if n.failed {
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
	line, err := json.Marshal(e)
	if err != nil {
		n.failed = true
		return
	}
	if _, err := n.w.Write(append(line, '\n')); err != nil {
		n.failed = true
		return
	}
	if err := n.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		n.failed = true
	}
}
