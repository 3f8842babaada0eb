package testhost

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms for at most 30 s, and fails t naming
// what it waited for if cond never held: for work done in goroutines a
// test cannot join, never as a timed assertion.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitForWithin(t, 30*time.Second, what, cond)
}

// WaitForWithin is WaitFor with its own bound d, for waits on slower
// work (a cluster's controller or kubelet).
func WaitForWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for range max(1, int(d/(10*time.Millisecond))) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gave up waiting %v for %s", d, what)
}

// SyncBuffer is a bytes.Buffer safe for concurrent use, for a log that
// goroutines write while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
