package e2b

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestExecStreamTicks: an unfinished line is sent once it has waited
// execPartialAfter, a silent stream gets a keepalive every
// execKeepaliveEvery (which also starts it, after the execution count),
// and a character split across writes is never split in a line. The
// clock is the tick's argument, never the test's own timing.
func TestExecStreamTicks(t *testing.T) {
	w := httptest.NewRecorder()
	s := newExecStream(w, func() { t.Error("the stream broke") }, execCountLine{Type: "number_of_executions", Count: 1})
	start := s.last
	s.tick(start.Add(execKeepaliveEvery))
	out := execOutput{s, &s.out}
	_, _ = out.Write([]byte("50% \xe2\x82"))
	held := s.out.since
	s.tick(held.Add(execPartialAfter - time.Millisecond))
	s.tick(held.Add(execPartialAfter))
	_, _ = out.Write([]byte("\xac done\n"))
	s.tick(s.last.Add(execKeepaliveEvery))
	s.finish()
	lines := parseExecLines(t, w.Body.Bytes())
	if got, want := lineTypes(lines), "number_of_executions,keepalive,stdout,stdout,keepalive,end_of_execution"; got != want {
		t.Fatalf("lines %s, want %s", got, want)
	}
	if lines[2]["text"] != "50% " || lines[3]["text"] != "€ done\n" {
		t.Errorf("texts %q %q, want the partial line up to its last whole character, then the rest", lines[2]["text"], lines[3]["text"])
	}
}

// failingWriter is a response writer whose every write fails, as one to
// a client that went away.
type failingWriter struct {
	h      http.Header
	writes int
}

func (f *failingWriter) Header() http.Header { return f.h }
func (f *failingWriter) WriteHeader(int)     {}
func (f *failingWriter) Write([]byte) (int, error) {
	f.writes++
	return 0, errors.New("broken pipe")
}

// TestExecStreamBreaks: a failed write breaks the stream: it ends the
// execution once, and nothing more is written, however much output
// follows.
func TestExecStreamBreaks(t *testing.T) {
	fw := &failingWriter{h: http.Header{}}
	breaks := 0
	s := newExecStream(fw, func() { breaks++ }, execCountLine{Type: "number_of_executions", Count: 1})
	out := execOutput{s, &s.out}
	for range 100 {
		if n, err := out.Write([]byte(strings.Repeat("x", 10) + "\n")); n != 11 || err != nil {
			t.Fatalf("Write = %d, %v; want all taken, no error", n, err)
		}
	}
	s.finish()
	if breaks != 1 || fw.writes != 1 {
		t.Errorf("%d breaks, %d writes; want the first write to break the stream once", breaks, fw.writes)
	}
}
