package pace

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBucketWaits: a burst goes through at once, then each start waits
// for its token, and time refills the bucket up to the burst only.
func TestBucketWaits(t *testing.T) {
	clock := time.Unix(0, 0)
	b := NewWithClock(4, 2, func() time.Time { return clock })
	steps := []struct {
		advance time.Duration
		want    time.Duration
	}{
		{0, 0},                      // burst
		{0, 0},                      // burst
		{0, 250 * time.Millisecond}, // one token at 4/s
		{250 * time.Millisecond, 250 * time.Millisecond},
		{10 * time.Second, 0}, // refilled, but to the burst only
		{0, 0},
		{0, 250 * time.Millisecond},
	}
	for i, st := range steps {
		clock = clock.Add(st.advance)
		if got := b.Reserve(); got != st.want {
			t.Errorf("step %d (after %v): wait %v, want %v", i, st.advance, got, st.want)
		}
	}
}

// TestCanceledWaitGivesBack: a wait its context ends fails with the
// context's error and leaves the token for the next start.
func TestCanceledWaitGivesBack(t *testing.T) {
	clock := time.Unix(0, 0)
	b := NewWithClock(1, 1, func() time.Time { return clock })
	if err := b.Wait(context.Background()); err != nil {
		t.Fatalf("first Wait() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait() with an ended context = %v, want context.Canceled", err)
	}
	clock = clock.Add(time.Second)
	if got := b.Reserve(); got != 0 {
		t.Errorf("Reserve() a token's time after a canceled wait = %v, want 0", got)
	}
}

// TestNilBucketNeverWaits: nothing to pace.
func TestNilBucketNeverWaits(t *testing.T) {
	var b *Bucket
	if got := b.Reserve(); got != 0 {
		t.Errorf("nil Reserve() = %v, want 0", got)
	}
}
