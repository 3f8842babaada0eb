package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// SetExpiry makes one of owner's sessions expire ttl from now, shorter or
// longer than before, as E2B's setTimeout does (each call measures from
// the time of the call). The session's longest life still holds: it
// cannot be moved past its creation plus MaxTTL (--max-ttl), so a client
// cannot keep a session alive beyond what the operator allows by calling
// again. Another owner's session answers ErrNotFound. ctx ends the
// wait for the attach of a session another server holds.
func (m *Manager) SetExpiry(ctx context.Context, owner, id string, ttl time.Duration) (Info, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return Info{}, err
	}
	if ttl <= 0 {
		return Info{}, fmt.Errorf("%w: timeout %v must be positive", spec.ErrInvalid, ttl)
	}
	if err := m.setExpires(s, time.Now().Add(ttl)); err != nil {
		return Info{}, err
	}
	return s.info(), nil
}

// setExpires moves s's expiry to at, within its longest life, and writes
// its record with s.mu held and only while it is not ending, so a Delete
// racing with it (which removes the record) is never undone.
func (m *Manager) setExpires(s *session, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateStopping || s.state == StateGone {
		return fmt.Errorf("%w: session %s is ending", ErrClosed, s.id)
	}
	if last := s.created.Add(m.cfg.MaxTTL); at.After(last) {
		return fmt.Errorf("%w: the session cannot live past %s, %v after it was created (this server's ceiling, set by --max-ttl): ask for at most %v",
			spec.ErrInvalid, last.UTC().Format(time.RFC3339), m.cfg.MaxTTL, time.Until(last).Truncate(time.Second))
	}
	s.expires = at
	if m.cfg.Store == nil {
		return nil
	}
	if err := m.cfg.Store.SaveSession(m.recordLocked(s)); err != nil {
		return fmt.Errorf("saving session %s: %w", s.id, err)
	}
	return nil
}
