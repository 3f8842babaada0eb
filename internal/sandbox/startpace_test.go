package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStartPacing starts sessions and runs of one owner back to back on
// a fake clock: the burst passes, the next start is refused with
// ErrTooMany saying how long to wait and naming the flag, another owner
// is not held back, time brings starts back at the rate, and a start
// refused a slot costs none of the owner's starts.
func TestStartPacing(t *testing.T) {
	const share = 10
	m, _ := newTestManager(t, Config{MaxSessions: 4 * share, MaxPerOwner: share, StartRate: 2})
	clock := time.Unix(1000, 0)
	m.starts.now = func() time.Time { return clock }
	ctx := context.Background()
	start := func(owner string, i int) error {
		if i%2 == 0 {
			_, err := m.Run(ctx, owner, defaultOptions(), ExecRequest{Command: []string{"true"}}, Stream{})
			return err
		}
		info, err := m.Create(ctx, owner, defaultOptions())
		if err == nil {
			err = m.Delete(ctx, owner, info.ID)
		}
		return err
	}
	for i := range minStartBurst {
		if err := start("alice", i); err != nil {
			t.Fatalf("alice's start %d of the burst of %d: %v", i, minStartBurst, err)
		}
	}
	steps := []struct {
		owner   string
		advance time.Duration
		want    time.Duration // the wait refused with; 0: started
	}{
		{"alice", 0, 500 * time.Millisecond}, // a Run past the burst
		{"alice", 0, 500 * time.Millisecond}, // a Create past the burst
		{"bob", 0, 0},
		{"alice", 200 * time.Millisecond, 300 * time.Millisecond},
		{"alice", 300 * time.Millisecond, 0},
		{"alice", 0, 500 * time.Millisecond},
	}
	for i, st := range steps {
		clock = clock.Add(st.advance)
		err := start(st.owner, i)
		var paced *StartPacedError
		switch {
		case st.want == 0 && err != nil:
			t.Errorf("step %d: %s's start %v later: %v, want it started", i, st.owner, st.advance, err)
		case st.want == 0:
		case !errors.As(err, &paced) || !errors.Is(err, ErrTooMany) || paced.Wait != st.want || !strings.Contains(err.Error(), "--start-rate"):
			t.Errorf("step %d: %s's start %v later: %v, want ErrTooMany, a wait of %v, naming --start-rate", i, st.owner, st.advance, err, st.want)
		}
	}

	var held []string
	for range share {
		info, err := m.Create(ctx, "carol", defaultOptions())
		if err != nil {
			t.Fatalf("carol's session %d of her share: %v", len(held), err)
		}
		held = append(held, info.ID)
	}
	for i := range 2 * minStartBurst { // past her burst, had they taken starts
		var paced *StartPacedError
		if _, err := m.Create(ctx, "carol", defaultOptions()); !errors.Is(err, ErrTooMany) || errors.As(err, &paced) {
			t.Fatalf("carol's Create %d past her share: %v, want ErrTooMany for the share, not pacing", i, err)
		}
	}
	if err := m.Delete(ctx, "carol", held[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "carol", defaultOptions()); err != nil {
		t.Errorf("carol's Create after a Delete, her refused starts given back: %v", err)
	}
}

// TestStartPacerOff: a negative rate paces nothing, and Validate refuses
// a rate out of range naming the flag.
func TestStartPacerOff(t *testing.T) {
	if p := newStartPacer(-1); p != nil {
		t.Errorf("newStartPacer(-1) = %+v, want nil (not paced)", p)
	}
	var p *startPacer
	if _, err := p.take("alice"); err != nil {
		t.Errorf("a nil pacer refused a start: %v", err)
	}
	for _, r := range []float64{MaxStartRate + 1} {
		if err := (Config{StartRate: r}).Validate(); err == nil || !strings.Contains(err.Error(), "--start-rate") {
			t.Errorf("Validate with StartRate %g = %v, want an error naming --start-rate", r, err)
		}
	}
}
