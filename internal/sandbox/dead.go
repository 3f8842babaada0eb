package sandbox

import (
	"fmt"
	"slices"
	"time"
)

// DeadError is the ErrDead a session whose sandbox died answers with. It
// says whether the session's files are kept, so a front end offers file
// reads only where they can succeed: the server keeps files only for
// sessions with a persistent workspace (see Store).
type DeadError struct {
	// ID is the session's.
	ID string
	// At is when it died; zero when it died during the exec answered.
	At time.Time
	// Reason says why it died.
	Reason string
	// FilesKept: the session's files can still be read and listed.
	FilesKept bool
}

func (e *DeadError) Error() string {
	files := "its files can still be read"
	if !e.FilesKept {
		files = "nothing of it is left"
	}
	when := "ended during the exec"
	if !e.At.IsZero() {
		when = "died at " + e.At.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%v: session %s %s: %s; %s; delete it when done", ErrDead, e.ID, when, e.Reason, files)
}

// Unwrap makes a DeadError an ErrDead.
func (e *DeadError) Unwrap() error { return ErrDead }

// A dead session gives back its slot and memory budget at burial, so
// nothing but these bounds keeps a client that creates sessions and lets
// them die from filling the server's memory with their records.
const (
	// deadGrace is how long a dead session with no kept files stays to
	// answer why it died, whatever its own TTL and idle timeout.
	deadGrace = 10 * time.Minute
	// maxDeadPerOwner is how many dead sessions one owner keeps; past it
	// the oldest ones without kept files go first, then the oldest.
	maxDeadPerOwner = 16
)

// shedLocked drops from a dead session what only a live one needs: its
// environment (megabytes, at most) and network rules. s.mu is held.
func (s *session) shedLocked() {
	s.spec.Env = nil
	s.spec.Network.Allow, s.spec.Network.Deny = nil, nil
}

// deadExpiredLocked says a dead session without kept files has outlived
// deadGrace. s.mu is held.
func (s *session) deadExpiredLocked(now time.Time) bool {
	return s.state == StateDead && s.ws == "" && now.Sub(s.diedAt) >= deadGrace
}

// trimDead ends owner's dead sessions beyond maxDeadPerOwner.
func (m *Manager) trimDead(owner string) {
	for _, s := range m.deadOverCap(owner) {
		m.end(s)
	}
}

// deadOverCap lists owner's dead sessions beyond maxDeadPerOwner, in the
// order they should go: without kept files first, oldest first.
func (m *Manager) deadOverCap(owner string) []*session {
	type dead struct {
		s    *session
		kept bool
		at   time.Time
	}
	var all []dead
	m.mu.Lock()
	for _, s := range m.sessions {
		if s.owner != owner {
			continue
		}
		s.mu.Lock()
		if s.state == StateDead {
			all = append(all, dead{s, s.ws != "", s.diedAt})
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	if len(all) <= maxDeadPerOwner {
		return nil
	}
	slices.SortFunc(all, func(a, b dead) int {
		if a.kept != b.kept {
			if a.kept {
				return 1
			}
			return -1
		}
		return a.at.Compare(b.at)
	})
	var over []*session
	for _, d := range all[:len(all)-maxDeadPerOwner] {
		over = append(over, d.s)
	}
	return over
}
