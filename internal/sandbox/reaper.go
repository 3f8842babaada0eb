package sandbox

import (
	"errors"
	"time"
)

// reapLoop ends sessions past their TTL, idle past their idle timeout, or
// whose sandbox died, until the Manager closes.
func (m *Manager) reapLoop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.ReapEvery)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.reap(now)
		}
	}
}

// reap ends every expired session; each ends in its own goroutine, so a
// slow teardown never delays the others' expiry.
func (m *Manager) reap(now time.Time) {
	m.mu.Lock()
	var due []*session
	var reasons []string
	var dead []bool
	for _, s := range m.sessions {
		if reason, wasDead := s.expired(now); reason != "" {
			due, reasons, dead = append(due, s), append(reasons, reason), append(dead, wasDead)
		}
	}
	m.mu.Unlock()
	for i, s := range due {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			if reasons[i] == "died" {
				m.buryDied(s)
				return
			}
			reason := reasons[i]
			if reason == "pause" {
				if !m.autoPause(s) {
					return
				}
				reason = "idle"
			}
			// A dead session was reported when it died; a session a
			// later round picked before this end began is reported once.
			if m.endReleasing(s) && !dead[i] {
				m.cfg.OnReap(s.owner, reason)
			}
		}()
	}
}

// watchBox buries s the moment its sandbox dies, so that the session
// answers as dead (its state, and 409 to an exec) from then on, not from
// the reaper's next round; it returns when s ends or the Manager closes.
//
// A box closed for a snapshot is not a death: a session whose box is no
// longer the one watched (snapshotted, maybe resumed with another box,
// watched by another watchBox) is left alone.
func (m *Manager) watchBox(s *session) {
	defer m.wg.Done()
	box := s.currentBox()
	select {
	case <-box.Done():
		// A box saved whole for a memory snapshot ends with the save:
		// the snapshot closes it, or, failed, leaves it dead.
		s.awaitSave()
		if s.currentBox() == box && !s.isBoxClosed() {
			m.buryDied(s)
		}
	case <-s.gone:
	case <-m.stop:
	}
}

// buryDied buries s, whose sandbox died, and reports it to OnReap once,
// whichever of watchBox and the reaper comes first.
func (m *Manager) buryDied(s *session) {
	box := s.currentBox()
	_ = settledErr(box) // for its wait: deathCause reads the settled error itself
	if m.bury(s, deathCause(box)) {
		m.cfg.OnReap(s.owner, "died")
	}
}

// deathCause is a dead session's reason: that its sandbox ended on its
// own, and why, as far as the box can tell, in one clause.
func deathCause(b Box) string {
	const died = "its sandbox ended unexpectedly"
	var c interface{ Cause() string }
	switch err := b.Err(); {
	case errors.As(err, &c):
		return died + ": " + c.Cause()
	case err != nil:
		return died + ": " + err.Error()
	}
	return died
}

// expired says why s must end now, or "", and whether s is dead already.
func (s *session) expired(now time.Time) (reason string, dead bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dead = s.state == StateDead
	if s.state == StateStopping || s.state == StateGone {
		return "", dead
	}
	if !dead && !s.boxClosed && s.saving == nil {
		select {
		case <-s.box.Done():
			return "died", dead
		default:
		}
	}
	switch {
	case !now.Before(s.expires):
		return "ttl", dead
	case s.state == StateReady && (s.autoPause || s.autoSnapshot) && now.Sub(s.lastUsed) >= s.idle:
		return "pause", dead
	case (s.state == StateReady || dead) && now.Sub(s.lastUsed) >= s.idle:
		return "idle", dead
	case s.deadExpiredLocked(now):
		return "dead", dead
	}
	return "", dead
}
