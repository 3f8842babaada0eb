package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestExecBurstsReservoir: an owner's new sessions share burstReservoirs
// minimum bursts, one coming back every burstRefillSeconds; other owners
// are not touched.
func TestExecBurstsReservoir(t *testing.T) {
	b := newExecBursts(DefaultExecPace)
	clock := time.Unix(1000, 0)
	b.buckets.now = func() time.Time { return clock }
	steps := []struct {
		owner   string
		advance time.Duration
		want    int
	}{
		{"alice", 0, minExecBurst},
		{"alice", 0, minExecBurst},
		{"alice", 0, minExecBurst},
		{"alice", 0, minExecBurst},
		{"alice", 0, 0},
		{"bob", 0, minExecBurst},
		{"alice", burstRefillSeconds*time.Second + time.Second, minExecBurst},
		{"alice", 0, 26},
	}
	for i, st := range steps {
		clock = clock.Add(st.advance)
		if got := b.take(st.owner, minExecBurst); got != st.want {
			t.Errorf("step %d: %s's new session got %d of its burst, want %d", i, st.owner, got, st.want)
		}
	}
	if got := (*execBursts)(nil).take("alice", 7); got != 7 {
		t.Errorf("unpaced take = %d, want the whole 7", got)
	}
}

// TestSessionChurnRenewsNoBurst: a key that creates and deletes sessions
// gets a fresh exec burst for the first few only, not for every session.
func TestSessionChurnRenewsNoBurst(t *testing.T) {
	m, _ := newTestManager(t, Config{})
	tokens := func(owner string) float64 {
		info, err := m.Create(context.Background(), owner, defaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.lookupCtx(context.Background(), owner, info.ID)
		got := s.pace.lim.TokensAt(time.Now())
		if err := m.Delete(context.Background(), owner, info.ID); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i := range burstReservoirs {
		if got := tokens("alice"); got < minExecBurst {
			t.Errorf("alice's session %d starts with %.0f tokens, want its burst of at least %d", i, got, minExecBurst)
		}
	}
	if got := tokens("alice"); got > minExecBurst/2 {
		t.Errorf("alice's session %d starts with %.0f tokens, want next to none: its reservoir is spent", burstReservoirs, got)
	}
	if got := tokens("bob"); got < minExecBurst {
		t.Errorf("bob's first session starts with %.0f tokens, want its burst of at least %d", got, minExecBurst)
	}
}
