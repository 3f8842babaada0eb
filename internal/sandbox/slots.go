package sandbox

import "fmt"

// slotCount counts the slots of one kind taken (paused sessions,
// snapshotted ones), in all and by owner, against a server-wide cap and
// each owner's share of it. The Manager's mu guards it.
type slotCount struct {
	// kind names the sessions that hold the slots ("paused"), flag the
	// option that caps them ("max-paused"), for refusals.
	kind, flag string
	n          int
	byOwner    map[string]int
}

func newSlotCount(kind, flag string) slotCount {
	return slotCount{kind: kind, flag: flag, byOwner: map[string]int{}}
}

// take takes one for owner, or fails with ErrTooMany naming the cap
// reached: the server's (most) or owner's share of it.
func (c *slotCount) take(owner string, most, share int) error {
	if c.n >= most {
		return fmt.Errorf("%w: the server holds its limit of %d %s sessions (set by --%s); resume or delete one first",
			ErrTooMany, most, c.kind, c.flag)
	}
	if n := c.byOwner[owner]; n >= share {
		return fmt.Errorf("%w: this key holds %d %s sessions, its share of --%s; resume or delete one first", ErrTooMany, n, c.kind, c.flag)
	}
	c.add(owner)
	return nil
}

// add counts one for owner whatever the cap (a session a former server
// left, which this one must count).
func (c *slotCount) add(owner string) {
	c.n++
	c.byOwner[owner]++
}

// give gives back one of owner's.
func (c *slotCount) give(owner string) {
	c.n--
	if c.byOwner[owner]--; c.byOwner[owner] <= 0 {
		delete(c.byOwner, owner)
	}
}

// takeCounted takes one of c's slots (paused or snapshotted sessions)
// for owner, within most, the server's cap, and owner's share of it, or
// fails with ErrTooMany naming the flag that sets them; a server shutting
// down gives none.
func (m *Manager) takeCounted(c *slotCount, most int, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: the server is shutting down", ErrClosed)
	}
	return c.take(owner, most, Share(most, m.cfg.Owners))
}

// giveCounted gives back one of owner's slots of c.
func (m *Manager) giveCounted(c *slotCount, owner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.give(owner)
}
