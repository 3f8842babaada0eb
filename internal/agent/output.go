package agent

import (
	"bytes"
	"io"

	"github.com/warden-sandbox/warden/internal/drain"
)

// Capture reads a stream to its end, keeping the first limit bytes and
// passing them on to live as they arrive. Past the limit it throws the
// rest away at next to no cost to the host (drain.Pipe.Discard), so the
// program never blocks for good, and a flood costs the host almost
// nothing: the program waits on its full pipe instead.
type Capture struct {
	limit     int64
	live      io.Writer
	buf       bytes.Buffer
	truncated bool
	copied    int64
	discarded int64
}

// NewCapture keeps up to limit bytes of a stream and copies them to live,
// which may be nil.
func NewCapture(limit int64, live io.Writer) *Capture { return &Capture{limit: limit, live: live} }

// Output is what was kept, and whether the stream went past the limit.
func (c *Capture) Output() (string, bool) { return c.buf.String(), c.truncated }

// captureChunk is the most one read takes from the pipe.
const captureChunk = 32 << 10

// Drain reads p to its end or first error (p closed); run it on its own
// goroutine.
func (c *Capture) Drain(p *drain.Pipe) {
	defer func() { c.copied, c.discarded = p.Copied(), p.Discarded() }()
	chunk := make([]byte, captureChunk)
	for room := c.limit; room > 0; room = c.limit - int64(c.buf.Len()) {
		n, err := p.Read(chunk[:min(room, captureChunk)])
		if n > 0 {
			c.Keep(chunk[:n])
		}
		if err != nil {
			return
		}
	}
	for {
		n, err := p.Discard()
		if n > 0 {
			c.truncated = true
		}
		if err != nil {
			return
		}
	}
}

// Keep adds p as if it came from the stream.
func (c *Capture) Keep(p []byte) {
	room := c.limit - int64(c.buf.Len())
	if int64(len(p)) > room {
		p, c.truncated = p[:max(room, 0)], true
	}
	if len(p) == 0 {
		return
	}
	c.buf.Write(p)
	if c.live != nil {
		// A caller's writer failing (a closed terminal) must not stop the
		// drain; the captured copy stays complete.
		if _, err := c.live.Write(p); err != nil {
			c.live = nil
		}
	}
}
