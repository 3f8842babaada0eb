package interp

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"
)

// testRunTimeout bounds every Run in the tests so a bug fails fast instead
// of hanging the suite; no test asserts on timing.
const testRunTimeout = 30 * time.Second

// syncBuffer is a bytes.Buffer safe for the pump goroutines and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cancelOn is a writer that cancels a context once it has seen marker, so
// a test can interrupt a run exactly when it is known to be running.
type cancelOn struct {
	syncBuffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.syncBuffer.Write(p)
	if strings.Contains(c.String(), c.marker) {
		c.cancel()
	}
	return n, err
}
