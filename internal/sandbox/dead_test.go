package sandbox

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// killAndBury ends the sandbox of owner's session id as if it died, and
// waits (bounded) until the Manager has buried it.
func killAndBury(t *testing.T, m *Manager, owner, id string) *session {
	t.Helper()
	s, err := m.lookupCtx(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.box.Close()
	if !waitUntil(func() bool { return s.currentState() == StateDead }) {
		t.Fatalf("session %s was not buried: state %s", id, s.currentState())
	}
	return s
}

// TestDeadSessionShedsWhatOnlyALiveOneNeeds: a buried session keeps
// neither its environment nor its network rules, and reading it does not
// prolong its life.
func TestDeadSessionShedsWhatOnlyALiveOneNeeds(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour})
	o := defaultOptions()
	o.Env = []string{"BIG=" + strings.Repeat("x", 1<<20)}
	info, err := m.Create(context.Background(), "alice", o)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
	s.mu.Lock()
	s.spec.Network.Allow, s.spec.Network.Deny = []string{"example.org"}, []string{"10.0.0.0/8"}
	s.mu.Unlock()
	killAndBury(t, m, "alice", info.ID)
	s.mu.Lock()
	env, allow, deny, used := s.spec.Env, s.spec.Network.Allow, s.spec.Network.Deny, s.lastUsed
	s.mu.Unlock()
	if env != nil || allow != nil || deny != nil {
		t.Errorf("dead session kept env of %d entries, allow %q, deny %q; want none", len(env), allow, deny)
	}
	time.Sleep(2 * time.Millisecond)
	_, _ = m.Files(context.Background(), "alice", info.ID)
	if got, _ := m.Get(context.Background(), "alice", info.ID); !got.LastUsedAt.Equal(used) {
		t.Errorf("LastUsedAt after Files() on a dead session = %v, want %v (unchanged)", got.LastUsedAt, used)
	}
}

// TestDeadSessionWithoutFilesExpires: a dead session with nothing kept
// goes after deadGrace, however long its own TTL and idle timeout, and
// OnReap, told when it died, is not told again.
func TestDeadSessionWithoutFilesExpires(t *testing.T) {
	var mu sync.Mutex
	var reaped []string
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, OnReap: func(_, r string) {
		mu.Lock()
		reaped = append(reaped, r)
		mu.Unlock()
	}})
	o := defaultOptions()
	o.TTL, o.IdleTimeout = 24*time.Hour, 24*time.Hour
	info, err := m.Create(context.Background(), "alice", o)
	if err != nil {
		t.Fatal(err)
	}
	s := killAndBury(t, m, "alice", info.ID)
	s.mu.Lock()
	died := s.diedAt
	s.mu.Unlock()
	m.reap(died.Add(deadGrace - time.Second))
	if _, err := m.Get(context.Background(), "alice", info.ID); err != nil {
		t.Fatalf("Get() before the grace is over = %v, want the dead session", err)
	}
	m.reap(died.Add(deadGrace))
	if !waitUntil(func() bool { _, err := m.Get(context.Background(), "alice", info.ID); return err != nil }) {
		t.Fatalf("dead session without files still there %v after it died", deadGrace)
	}
	m.reap(died.Add(2 * deadGrace))
	mu.Lock()
	defer mu.Unlock()
	if len(reaped) != 1 || reaped[0] != "died" {
		t.Errorf("OnReap told %q, want only [died]", reaped)
	}
}

// TestDeadSessionsPerOwnerAreCapped: an owner whose sessions keep dying
// keeps only maxDeadPerOwner of them, the newest.
func TestDeadSessionsPerOwnerAreCapped(t *testing.T) {
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, MaxSessions: 4})
	var ids []string
	for range maxDeadPerOwner + 3 {
		info, err := m.Create(context.Background(), "alice", defaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		killAndBury(t, m, "alice", info.ID)
		ids = append(ids, info.ID)
	}
	if !waitUntil(func() bool { return m.CountsOf("alice")[StateDead] <= maxDeadPerOwner }) {
		t.Fatalf("alice holds %d dead sessions, want at most %d", m.CountsOf("alice")[StateDead], maxDeadPerOwner)
	}
	for i, id := range ids {
		_, err := m.Get(context.Background(), "alice", id)
		if kept, want := err == nil, i >= 3; kept != want {
			t.Errorf("session %d of %d kept = %v, want %v (the oldest go first)", i, len(ids), kept, want)
		}
	}
}

// TestReaperReportsEachEndOnce: rounds that pick the same expired session
// before the first one's end has begun report it once.
func TestReaperReportsEachEndOnce(t *testing.T) {
	var mu sync.Mutex
	reaped := 0
	m, _ := newTestManager(t, Config{ReapEvery: time.Hour, OnReap: func(string, string) {
		mu.Lock()
		reaped++
		mu.Unlock()
	}})
	if _, err := m.Create(context.Background(), "alice", defaultOptions()); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(24 * time.Hour)
	for range 5 {
		m.reap(later)
	}
	if !waitUntil(func() bool { return len(m.List("alice")) == 0 }) {
		t.Fatal("the expired session was not ended")
	}
	_ = m.Close() // waits for the reaper's goroutines
	mu.Lock()
	defer mu.Unlock()
	if reaped != 1 {
		t.Errorf("OnReap told %d times, want 1", reaped)
	}
}
