package microvm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds on what the host keeps of the guest console (hostile text): the
// last consoleLines lines, each cut to consoleLineLen bytes before escaping.
const (
	consoleLines   = 20
	consoleLineLen = 200
)

// consoleLog drains the console pipe (so QEMU never blocks on it) and
// keeps its last lines, escaped, for error messages.
type consoleLog struct {
	r         io.ReadCloser
	closeOnce sync.Once
	mu        sync.Mutex
	lines     []string
	done      chan struct{}
}

// newConsoleLog drains r until its end and then closes it.
func newConsoleLog(r io.ReadCloser) *consoleLog {
	c := &consoleLog{r: r, done: make(chan struct{})}
	go c.drain()
	return c
}

func (c *consoleLog) drain() {
	defer close(c.done)
	defer c.close()
	br := bufio.NewReaderSize(c.r, consoleLineLen)
	for {
		line, err := readBoundedLine(br)
		if line != "" {
			c.add(line)
		}
		if err != nil {
			return
		}
	}
}

// finish waits for the drain to reach the pipe's end, at most grace:
// after QEMU has exited its end may still be held open elsewhere (a QEMU
// taken over by its guest can pass its descriptor on), so past grace the
// host end is closed, which ends the read the drain is blocked in.
func (c *consoleLog) finish(grace time.Duration) {
	select {
	case <-c.done:
	case <-time.After(grace):
		c.close()
		<-c.done
	}
}

// close closes the console pipe once, logging a failure.
func (c *consoleLog) close() {
	c.closeOnce.Do(func() {
		if err := c.r.Close(); err != nil {
			warn("closing the console pipe", err)
		}
	})
}

// readBoundedLine reads one line, keeping its first consoleLineLen bytes
// and discarding the rest, so a guest printing without newlines costs no
// memory.
func readBoundedLine(br *bufio.Reader) (string, error) {
	var kept []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if room := consoleLineLen - len(kept); room > 0 {
			kept = append(kept, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return escape(strings.TrimRight(string(kept), "\r\n")), err
	}
}

func (c *consoleLog) add(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
	if len(c.lines) > consoleLines {
		c.lines = append(c.lines[:0], c.lines[len(c.lines)-consoleLines:]...)
	}
}

// Lines returns the last lines seen.
func (c *consoleLog) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string{}, c.lines...)
}

// tail is the last n lines joined with " | " for a one-line error.
func (c *consoleLog) tail(n int) string {
	l := c.Lines()
	if len(l) == 0 {
		return "(console empty)"
	}
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// escape makes guest text safe for a terminal or log: printable runes
// stay, everything else (escape sequences, other control bytes, invalid
// UTF-8) becomes a \xNN or \u escape.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}
