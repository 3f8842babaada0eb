package native

import (
	"bytes"
	"io"
)

// capture reads a stream to its end, keeping the first limit bytes and
// passing them on to live as they arrive. Past the limit it keeps reading
// and discarding, so the program never blocks on a full pipe.
type capture struct {
	limit     int64
	live      io.Writer
	buf       bytes.Buffer
	truncated bool
}

func (c *capture) drain(r io.Reader) {
	chunk := make([]byte, 32*1024)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.keep(chunk[:n])
		}
		if err != nil {
			return
		}
	}
}

func (c *capture) keep(p []byte) {
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
