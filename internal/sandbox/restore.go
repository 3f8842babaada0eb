package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// resumeSnapshot moves s from snapshotted to ready: it takes a run slot
// and the memory budget back (a Create's limits and start token, as a
// box is built), restores the box from the snapshot's saved memory, its
// interpreters adopted, or else starts a fresh box of s's spec and
// restores the files (restoreBox), and records s running before the
// snapshot is dropped, so a crash at any step leaves s snapshotted (the
// snapshot still whole) or running.
func (m *Manager) resumeSnapshot(ctx context.Context, s *session) error {
	return m.resumeSnapshotIn(ctx, s, nil)
}

// resumeSnapshotIn is resumeSnapshot in run, a run slot and charge held
// for s already (a fork's source's, see SnapshotOptions.keepRun), if it
// holds them: no other is taken, nor a start token; s keeps them, or,
// should the resume fail or s be resumed or ended meanwhile, they are
// given back. With run, s is resumed only while the fork holds it
// (forkHeld): a snapshot made after another call resumed it is left.
func (m *Manager) resumeSnapshotIn(ctx context.Context, s *session, run *heldRun) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if run != nil {
		defer s.setForkHeld(false)
	}
	s.mu.Lock()
	st, name, spc, held, recs, forked := s.state, s.snap, s.spec, s.snapCharge(), s.snapInterps, s.forkHeld
	s.mu.Unlock()
	if st != StateSnapshotted || (run != nil && !forked) {
		// Resumed meanwhile (and perhaps snapshotted again by another
		// call), or ending: the caller's call judges.
		run.giveBack(m, s.owner)
		return nil
	}
	bytes := m.charge(spc.Limits)
	m.keep(s, 0)
	if run != nil && run.held {
		bytes, run.held = run.bytes, false // from here on s's: released as its own
	} else if err := m.acquire(s.owner, false, bytes); err != nil {
		m.hold(s, held)
		return fmt.Errorf("resuming session %s from its snapshot: %w", s.id, err)
	}
	box, ws, root, lease, memory, err := m.restoreBox(ctx, s, spc, name)
	if err != nil {
		m.release(s.owner, bytes)
		m.hold(s, held)
		return err
	}
	step("restored")
	spc.Root = root
	var interps map[string]interp.Interpreter
	var procs map[string]*idSpawner
	if memory {
		interps, procs = m.adoptInterpreters(s.id, box, spc, recs)
	}
	s.mu.Lock()
	if s.state != StateSnapshotted || m.isClosed() {
		s.mu.Unlock()
		if err := closeHeld(interps, nil); err != nil {
			m.cfg.Logger.Warn("closing the interpreters of an unused sandbox", "session", s.id, "err", err)
		}
		m.discardBox(box, ws)
		lease()
		m.release(s.owner, bytes)
		return fmt.Errorf("%w: session %s ended while it was being resumed", ErrClosed, s.id)
	}
	s.box, s.ws, s.boxClosed, s.slot, s.snapSlot = box, ws, false, true, false
	s.interps, s.interpProcs = interps, procs
	s.snapMemory, s.snapInterps, s.forkHeld = 0, nil, false
	// A session revived by a new server finds its template again by
	// name: the box runs on root, which its record and info now name.
	s.spec.Root = root
	s.state, s.snap, s.snapAt, s.snapStats, s.lastUsed = StateReady, "", time.Time{}, snapshot.Stats{}, time.Now()
	if s.lease == nil {
		s.lease = lease
	} else {
		lease() // the session still held its template
	}
	// A record that cannot be written keeps naming the snapshot, which
	// is then kept too: a crash recovers the session snapshotted, its
	// files as they were at the snapshot.
	saveErr := m.saveDurablyLocked(s)
	if saveErr != nil {
		s.staleSnap = name // its end drops it (forget)
	}
	s.mu.Unlock()
	m.watch(s, bytes)
	m.giveSnapshotSlot(s.owner)
	if saveErr != nil {
		m.cfg.OnStoreError(saveErr)
		return nil
	}
	step("resumed")
	m.dropSnapshot(name, s.id)
	return nil
}

// restoreBox starts a box of spec spc for s from snapshot name: from
// its saved memory where it has one (memory), else, or should that
// restore fail (said in the log, never a failed resume: the files are
// there too), a fresh box with the files restored into its workspace;
// root is the template the box runs on, which lease holds.
func (m *Manager) restoreBox(ctx context.Context, s *session, spc spec.Spec, name string) (box Box, ws string, root spec.Root, lease func(), memory bool, err error) {
	lease = func() {}
	if spc.Root.Dir == "" && spc.Root.Template != "" {
		// Revived by a new server: the template is found again by name.
		if spc.Root, lease, err = m.resolveTemplate(spc.Root.Template, s.owner); err != nil {
			return nil, "", spec.Root{}, nil, false, fmt.Errorf("resuming session %s from its snapshot: %w", s.id, err)
		}
	}
	box, err = m.restoreMemory(ctx, s, spc, name)
	switch {
	case errors.Is(err, ErrBusy):
		// No copy slot in time: a files' restore would wait for one too.
		lease()
		return nil, "", spec.Root{}, nil, false, fmt.Errorf("resuming session %s from its snapshot: %w", s.id, err)
	case err != nil:
		m.cfg.Logger.Warn("restoring a session's saved memory failed; it resumes from its files, its processes and interpreters fresh", "session", s.id, "snapshot", name, "err", err)
	case box != nil:
		step("memory restored")
		return box, "", spc.Root, lease, true, nil
	}
	box, ws, err = m.startBox(ctx, spc)
	if err != nil {
		lease()
		return nil, "", spec.Root{}, nil, false, fmt.Errorf("resuming session %s from its snapshot: %w", s.id, err)
	}
	if err := m.restoreFiles(ctx, s, box, spc.Limits, name); err != nil {
		m.discardBox(box, ws)
		lease()
		return nil, "", spec.Root{}, nil, false, err
	}
	return box, ws, spc.Root, lease, false, nil
}

// restoreFiles copies snapshot name into box's empty workspace, as its
// sandbox user, within the session's limits; s's end stops it.
func (m *Manager) restoreFiles(ctx context.Context, s *session, box Box, l spec.Limits, name string) error {
	ctx, release := s.stopOnEnd(ctx)
	defer release()
	id := s.id
	done, err := m.copySlot(ctx)
	if err != nil {
		return fmt.Errorf("restoring session %s: %w", id, err)
	}
	defer done()
	lim := snapshotLimits(l)
	uid, gid := box.FileOwner()
	dst, err := workspace.FromFile(box.Workspace(), "/workspace of "+id, uid, gid, snapshot.WorkspaceLimits(lim))
	if err != nil {
		return fmt.Errorf("opening the workspace of session %s: %w", id, err)
	}
	defer closeLogged(m, dst, id)
	if err := snapshot.Clear(dst); err != nil {
		return fmt.Errorf("restoring session %s: %w", id, err)
	}
	if _, err := m.cfg.Snapshots.Restore(ctx, name, dst, lim); err != nil {
		return m.snapshotError(id, "restoring", err)
	}
	return nil
}

// hold makes s count bytes against its owner's budget again, unless s
// ended meanwhile: its end forgets s before it drops what s holds
// (endOnce), both under m.mu, so bytes held after that would never be
// given back.
func (m *Manager) hold(s *session, bytes int64) {
	if bytes <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.id] != s {
		return
	}
	m.held[s.id] = bytes
	m.bytesByOwner[s.owner] += bytes
}

// watch records what s holds of its owner's budget and watches its new
// box, as Create does for a new session.
func (m *Manager) watch(s *session, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[s.id] = bytes
	if !m.closed {
		m.wg.Add(1)
		go m.watchBox(s)
	}
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
