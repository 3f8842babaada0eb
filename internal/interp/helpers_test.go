package interp

import (
	"context"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// testRunTimeout bounds every Run in the tests so a bug fails fast instead
// of hanging the suite; no test asserts on timing.
const testRunTimeout = 30 * time.Second

// syncBuffer collects output written from other goroutines.
type syncBuffer = testhost.SyncBuffer

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
