package streammux

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
)

// countingPacer records what each of the reader's waits asked for.
type countingPacer struct {
	mu    sync.Mutex
	waits []int
}

func (p *countingPacer) WaitN(ctx context.Context, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waits = append(p.waits, n)
	return nil
}

// Every frame the reader takes, of every type, counts its length or
// FrameCost, whichever is more, and the reader waits on its pacer for
// what it owes once that reaches a chunk.
func TestReaderPacesEveryFrameAtLeastFrameCost(t *testing.T) {
	cfg := smallConfig()
	cfg.ReadRate, cfg.FrameCost = 1000, 20
	if got := cfg.paceChunk(); got != 50 {
		t.Fatalf("paceChunk() = %d, want 50 (two 16-byte frames)", got)
	}
	a, b := loopbackPair(t)
	p := &countingPacer{}
	m, err := newMux(a, nil, cfg, false, p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	go io.Copy(io.Discard, b) //nolint:errcheck // what the mux writes back
	one := frame(frameData, 1, 1, []byte{'x'})
	full := frame(frameData, 1, 16, make([]byte, cfg.MaxPayload))
	if _, err := b.Write(cat(hi(), frame(frameOpen, 1, 0, nil), one, one, one, one, one, full, frame(frameClose, 1, 0, nil))); err != nil {
		t.Fatal(err)
	}
	if err := b.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	within(t, "the stream's end", func() { <-m.Done() })
	if err := m.Err(); !errors.Is(err, ErrHungUp) {
		t.Fatalf("the stream ended with %v, want the peer's hang-up", err)
	}
	// Costs: hello 9+12=21, open 20, 1-byte data 20 each, 16-byte data 25,
	// close 20; a wait each time 50 or more is owed.
	want := []int{21 + 20 + 20, 20 + 20 + 20, 20 + 25 + 20}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Equal(p.waits, want) || m.paceDebt != 0 {
		t.Errorf("pacer waits: got %v owing %d, want %v owing 0", p.waits, m.paceDebt, want)
	}
}

// A reader waiting on its pacer is let go when the stream ends.
func TestPacedWaitEndsWithTheStream(t *testing.T) {
	a, b := loopbackPair(t)
	p := blockingPacer{entered: make(chan struct{}), returned: make(chan struct{})}
	cfg := smallConfig()
	cfg.ReadRate, cfg.FrameCost = 1000, 20
	m, err := newMux(a, nil, cfg, false, p)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, b) //nolint:errcheck // the hello the mux writes
	// 21 + 20 + 20: past a chunk (50), so the reader waits.
	if _, err := b.Write(cat(hi(), frame(frameOpen, 1, 0, nil), frame(frameOpen, 3, 0, nil))); err != nil {
		t.Fatal(err)
	}
	within(t, "the reader's wait on its pacer", func() { <-p.entered })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, "the paced wait's end", func() { <-p.returned })
}

// blockingPacer closes entered, waits until its context ends, then
// closes returned; it is for one wait.
type blockingPacer struct{ entered, returned chan struct{} }

func (p blockingPacer) WaitN(ctx context.Context, _ int) error {
	close(p.entered)
	<-ctx.Done()
	close(p.returned)
	return ctx.Err()
}

func TestDefaultConfigPacesSmallFramesOnly(t *testing.T) {
	c := DefaultConfig()
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, want int }{{1, 4 << 10}, {4<<10 - headerLen, 4 << 10}, {32 << 10, 32<<10 + headerLen}} {
		if got := c.frameCost(tc.n); got != tc.want {
			t.Errorf("frameCost(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if got, want := c.paceChunk(), c.ReadRate/100; got != want {
		t.Errorf("paceChunk() = %d, want %d (10 ms of ReadRate)", got, want)
	}
	if c.readBurst() < c.paceChunk()+c.frameCost(c.MaxPayload) {
		t.Errorf("readBurst() = %d holds no chunk (%d) and a full frame", c.readBurst(), c.paceChunk())
	}
	if got := c.ReadRate / c.FrameCost; got != 64<<10 {
		t.Errorf("small frames a second: got %d, want %d", got, 64<<10)
	}
}

func TestPacingConfigIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name            string
		rate, frameCost int
		ok              bool
	}{
		{"no bound", 0, 0, true},
		{"frame cost without a rate", 0, 4096, true},
		{"negative rate", -1, 0, false},
		{"negative frame cost", 1000, -1, false},
		{"frame cost past the rate", 1000, 1001, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := smallConfig()
			c.ReadRate, c.FrameCost = tc.rate, tc.frameCost
			if err := c.check(); (err == nil) != tc.ok {
				t.Errorf("check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
