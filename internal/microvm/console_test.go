package microvm

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain [    0.1] ok", "plain [    0.1] ok"},
		{"\x1b[2Jclear", `\u001b[2Jclear`},
		{"bell\a", `bell\u0007`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"rtl\u202eevil", `rtl\u202eevil`},
		{`back\slash`, `back\\slash`},
		{"héllo", "héllo"},
	}
	for _, tt := range tests {
		if got := escape(tt.in); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestConsoleBounded feeds a console more lines and longer lines than it
// keeps: memory stays bounded and only the tail survives.
func TestConsoleBounded(t *testing.T) {
	var in strings.Builder
	for i := range 1000 {
		in.WriteString(strings.Repeat("x", i%3*consoleLineLen) + "line\n")
	}
	in.WriteString(strings.Repeat("y", 1<<20)) // no newline at all
	c := newConsoleLog(io.NopCloser(strings.NewReader(in.String())))
	<-c.done
	lines := c.Lines()
	if len(lines) != consoleLines {
		t.Fatalf("kept %d lines, want %d", len(lines), consoleLines)
	}
	for _, l := range lines {
		if len(l) > consoleLineLen {
			t.Errorf("kept a %d-byte line, over %d", len(l), consoleLineLen)
		}
	}
	if last := lines[len(lines)-1]; last != strings.Repeat("y", consoleLineLen) {
		t.Errorf("last line = %.20q..., want the unterminated tail cut to %d bytes", last, consoleLineLen)
	}
	if got := c.tail(2); strings.Count(got, " | ") != 1 {
		t.Errorf("tail(2) = %.60q, want two lines", got)
	}
}

// TestConsoleFinishHeldPipe: a console pipe whose write end stays open
// elsewhere (a hostile QEMU passed it on) does not hold teardown: finish
// closes the host end past its grace and the drain ends.
func TestConsoleFinishHeldPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("last words\n"); err != nil {
		t.Fatal(err)
	}
	c := newConsoleLog(r)
	c.finish(time.Millisecond) // returns: the test would time out otherwise
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("reading the console pipe after finish = %v, want it closed", err)
	}
}
