package sandbox

import (
	"slices"
	"time"
)

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
		_ = m.end(s)
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
