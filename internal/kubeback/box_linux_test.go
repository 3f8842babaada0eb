package kubeback

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// idleBox is an agent box nobody execs in (a persistent interpreter's
// cells reach neither Exec nor Spawn): Done closes at Close.
type idleBox struct {
	sandbox.Box
	once sync.Once
	done chan struct{}
}

func (b *idleBox) Done() <-chan struct{} { return b.done }
func (b *idleBox) Close() error          { b.once.Do(func() { close(b.done) }); return nil }

// TestHeartbeatWhileHeld: a held session whose box sees no Exec or Spawn
// for several activity intervals (an interpreter busy past the idle
// timeout) still records its activity on its claim, every half interval,
// so the cluster's reaper never finds it idle; Close stops it (Release
// unholds the same way before it deletes the claim).
func TestHeartbeatWhileHeld(t *testing.T) {
	ab := &idleBox{done: make(chan struct{})}
	records := make(chan struct{}, 64)
	x := &box{
		Box: ab, ps: &podclaim.Session{ID: "ses_x"}, log: slog.Default(),
		settled: make(chan struct{}), unheld: make(chan struct{}),
		record: func(context.Context) error { records <- struct{}{}; return nil },
	}
	x.closed.Store(true) // no death to explain: explain needs no cluster
	go x.explain()
	go x.heartbeat(20 * time.Millisecond)
	bound := time.After(time.Minute) // a bound on the wait, not a timing assertion
	for n := 0; n < 4; n++ {
		select {
		case <-records:
		case <-bound:
			t.Fatalf("got %d activity records in a minute with interval 20ms, want 4", n)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-x.unheld:
	default:
		t.Errorf("after Close: the heartbeat is still held, want it stopped")
	}
}
