package agent

import (
	"bytes"
	"io"
)

// Capture reads a stream to its end, keeping the first limit bytes and
// passing them on to live as they arrive. Past the limit it keeps reading
// and discarding, so the program never blocks on a full pipe.
type Capture struct {
	limit     int64
	live      io.Writer
	buf       bytes.Buffer
	truncated bool
}

// NewCapture keeps up to limit bytes of a stream and copies them to live,
// which may be nil.
func NewCapture(limit int64, live io.Writer) *Capture { return &Capture{limit: limit, live: live} }

// Output is what was kept, and whether the stream went past the limit.
func (c *Capture) Output() (string, bool) { return c.buf.String(), c.truncated }

// Drain reads r to its end or first error; run it on its own goroutine.
func (c *Capture) Drain(r io.Reader) {
	chunk := make([]byte, 32*1024)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.Keep(chunk[:n])
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
