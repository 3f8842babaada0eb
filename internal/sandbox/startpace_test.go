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
// refused a slot costs none of the owner's starts. The clock moves a
// tick on every reading, as a real one does, so a start taken and given
// back later would show.
func TestStartPacing(t *testing.T) {
	const share = 10
	const tick = time.Microsecond
	m, _ := newTestManager(t, Config{MaxSessions: 4 * share, MaxPerOwner: share, StartRate: 2})
	clock := time.Unix(1000, 0)
	m.starts.buckets.now = func() time.Time {
		clock = clock.Add(tick)
		return clock
	}
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
	for i := range MinStartBurst {
		if err := start("alice", i); err != nil {
			t.Fatalf("alice's start %d of the burst of %d: %v", i, MinStartBurst, err)
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
		case !errors.As(err, &paced) || !errors.Is(err, ErrTooMany) || paced.Wait > st.want || paced.Wait < st.want-time.Millisecond || !strings.Contains(err.Error(), "--start-rate"):
			t.Errorf("step %d: %s's start %v later: %v, want ErrTooMany, a wait of %v (less the clock's ticks), naming --start-rate", i, st.owner, st.advance, err, st.want)
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
	for i := range 2 * MinStartBurst { // past her burst, had they taken starts
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

// TestRefusedStartsCostNothing on the real clock: an owner at her share
// of one is refused many Creates, more than her burst of starts; once she
// deletes her session, her next Create starts, as none of those refused
// took a start.
func TestRefusedStartsCostNothing(t *testing.T) {
	m, _ := newTestManager(t, Config{MaxSessions: 4, MaxPerOwner: 1, StartRate: MinStartRate})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatalf("alice's first Create: %v", err)
	}
	for i := range 2 * MinStartBurst {
		var paced *StartPacedError
		if _, err := m.Create(ctx, "alice", defaultOptions()); !errors.Is(err, ErrTooMany) || errors.As(err, &paced) {
			t.Fatalf("alice's Create %d past her share of 1: %v, want ErrTooMany for the share, not pacing", i, err)
		}
	}
	if err := m.Delete(ctx, "alice", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); err != nil {
		t.Errorf("alice's Create after her Delete, %d refused before it: %v, want it started", 2*MinStartBurst, err)
	}
}

// TestStartPacerOff: a negative rate paces nothing, and Validate refuses
// a rate out of range (above MaxStartRate, or below MinStartRate but not
// off) naming the flag.
func TestStartPacerOff(t *testing.T) {
	if p := newStartPacer(-1); p != nil {
		t.Errorf("newStartPacer(-1) = %+v, want nil (not paced)", p)
	}
	var p *startPacer
	if err := p.take("alice"); err != nil {
		t.Errorf("a nil pacer refused a start: %v", err)
	}
	for _, r := range []float64{MaxStartRate + 1, MinStartRate / 2, 1e-9} {
		if err := (Config{StartRate: r}).Validate(); err == nil || !strings.Contains(err.Error(), "--start-rate") {
			t.Errorf("Validate with StartRate %g = %v, want an error naming --start-rate", r, err)
		}
	}
	for _, r := range []float64{-1, 0, MinStartRate, 1, MaxStartRate} {
		if err := (Config{StartRate: r}).Validate(); err != nil {
			t.Errorf("Validate with StartRate %g = %v, want it accepted", r, err)
		}
	}
}
