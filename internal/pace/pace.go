// Package pace is a token bucket: it paces work whose cost falls on the
// host rather than on the sandbox that asked for it (exec starts, egress
// connections), in proportion to the sandbox's CPU quota. Tokens come at
// a rate per second up to a burst; each start takes one, and waits for it
// when there is none. Waiting costs nothing, so a flood is slowed to the
// rate at no cost to the host, while work in short bursts never waits.
package pace

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Bucket is a token bucket. Its zero value is not usable; see New. A nil
// *Bucket never waits, for callers with nothing to pace.
type Bucket struct {
	rate, burst float64
	now         func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// New makes a full bucket that refills at rate tokens a second, up to
// burst.
func New(rate, burst float64) *Bucket { return NewWithClock(rate, burst, time.Now) }

// NewWithClock is New with a clock of the caller's, for tests.
func NewWithClock(rate, burst float64, now func() time.Time) *Bucket {
	return &Bucket{rate: rate, burst: burst, now: now, tokens: burst, last: now()}
}

// Rate is how many tokens come per second.
func (b *Bucket) Rate() float64 { return b.rate }

// Reserve takes a token and says how long to wait before using it.
func (b *Bucket) Reserve() time.Duration {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// Cancel gives back a token Reserve took, for work that never started.
func (b *Bucket) Cancel() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+1)
}

// Wait takes a token, waiting for it as long as ctx allows; a wait that
// ctx ends gives the token back and returns ctx's error.
func (b *Bucket) Wait(ctx context.Context) error {
	d := b.Reserve()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		b.Cancel()
		return fmt.Errorf("waiting %v for a turn (%g per second): %w", d.Round(time.Millisecond), b.rate, ctx.Err())
	}
}
