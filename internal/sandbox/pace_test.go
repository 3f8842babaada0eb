package sandbox

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestExecPacedByQuota sends tiny execs to a session with the smallest
// CPU quota: the burst runs at once, the next exec waits for its turn
// (here until its context ends, without running) and the session stays
// usable.
func TestExecPacedByQuota(t *testing.T) {
	m, b := newTestManager(t, Config{})
	opts := defaultOptions()
	opts.Limits.CPUs = spec.MinCPUs
	info, err := m.Create(context.Background(), "alice", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range execBurst {
		if _, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Command: []string{"true", fmt.Sprint(i)}}, Stream{}); err != nil {
			t.Fatalf("exec %d of the burst = %v", i, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true", "past the burst"}}, Stream{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("exec past the burst with its context ended = %v, want it to wait (context.Canceled)", err)
	}
	b.mu.Lock()
	ran := b.lastExec.ran.Argv
	b.mu.Unlock()
	if ran[1] == "past the burst" {
		t.Error("the exec past the burst ran without waiting")
	}
	if got, _ := m.Get("alice", info.ID); got.State != StateReady || got.Execs != execBurst {
		t.Errorf("session after a canceled wait = %s with %d execs, want ready with %d", got.State, got.Execs, execBurst)
	}
}
