package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// forkSnapshotted is s's own snapshot to fork from, pinned until unpin,
// if s is snapshotted; ok is false otherwise.
func (m *Manager) forkSnapshotted(s *session) (src forkFrom, unpin func(), ok bool) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if s.currentState() != StateSnapshotted {
		return forkFrom{}, nil, false
	}
	s.mu.Lock()
	src = forkFrom{name: s.snap, memory: s.snapMemory > 0 && !m.cfg.FilesOnlySnapshots, recs: s.snapInterps}
	s.mu.Unlock()
	return src, m.pinSnapshot(src.name, s.id), true
}

// savesMemoryOf says whether a fork of s can copy its box's memory: the
// server keeps memory (not Config.FilesOnlySnapshots), its backend saves
// boxes whole, and s's spec lets it (SavesMemory).
func (m *Manager) savesMemoryOf(s *session) bool {
	if m.cfg.FilesOnlySnapshots {
		return false
	}
	mb, ok := m.backend.(MemoryBackend)
	return ok && mb.SavesMemory(s.spec) == nil
}

// forkSaved makes running s, whose box can be saved whole, a source
// whose copies keep its memory: s is snapshotted with its memory (the
// snapshot slot and the budget's charge are s's own, as any snapshotted
// session's), keeping its run slot and charge (keepRun), the forks are
// restored from that snapshot (forkMemory, reseeded), and done, once
// they are made, resumes s from it in that slot and charge, so it runs
// on with its memory (interpreters adopted): the copies count against
// the caps beside it, and no other call can take them meanwhile. An s
// found paused answers errNotRunning, left paused; one another call
// snapshotted meanwhile is left snapshotted. A snapshot that could not
// save the memory and left the box as it was is refused
// (memoryOrNothing), s resumed: the caller forks s's files instead, as
// for any other backend. One whose save ended the box leaves s
// snapshotted with its files, which the forks copy and s resumes from.
func (m *Manager) forkSaved(ctx context.Context, s *session) (src forkFrom, done func(), err error) {
	if err := m.cfg.Snapshots.Room(memoryImageBytes(s.spec.Limits)); err != nil {
		// Refused before the snapshot, which would copy the files only
		// to drop them (memoryOrNothing) for the caller to copy again.
		m.cfg.Logger.Warn("the fork copies the session's files only: no room on the state directory's disk for the box's image", "session", s.id, "err", err)
		return forkFrom{}, nil, errNoMemory
	}
	run := new(heldRun)
	// A save cut short ends the box, its processes gone: the caller's
	// going away must not do that to a running session, so the snapshot
	// runs to its end (bounded; s's end still stops it).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forkSaveWait)
	defer cancel()
	if err := m.snapshot(sctx, s, SnapshotOptions{Memory: true, memoryOrNothing: true, keepRun: run}); err != nil {
		return forkFrom{}, nil, err
	}
	src, unpin, ok := m.forkSnapshotted(s)
	if !ok {
		s.setForkHeld(false)
		run.giveBack(m, s.owner)
		return forkFrom{}, nil, fmt.Errorf("%w: session %s was resumed or ended while it was being saved for a fork; retry", ErrBusy, s.id)
	}
	return src, func() {
		if run.held {
			m.resumeForked(ctx, s, run)
		}
		unpin()
	}, nil
}

// forkSaveWait bounds the snapshot of a fork's running source, its
// files' copy and its save (gvisor.CheckpointWait is 2 minutes).
const forkSaveWait = 5 * time.Minute

// forkResumeWait bounds the resume of a fork's source from its snapshot.
const forkResumeWait = 2 * time.Minute

// resumeForked resumes s, snapshotted with its memory for a fork, once
// the copies are made, even if the fork's caller has gone, in run, the
// slot and charge it held running. A failure is logged; s then stays
// snapshotted, run given back, and resumes on its next use, as any
// snapshotted session.
func (m *Manager) resumeForked(ctx context.Context, s *session, run *heldRun) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forkResumeWait)
	defer cancel()
	if err := m.resumeSnapshotIn(ctx, s, run); err != nil && !errors.Is(err, ErrClosed) {
		m.cfg.Logger.Warn("resuming a fork's source from its snapshot failed; it resumes on its next use", "session", s.id, "err", err)
	}
}

// forkSavedFailed says whether a memory save for a fork failed for a
// reason a copy of the files would meet too (a running exec, no slot
// left, the session ended, the caller gone): that error is the fork's.
func forkSavedFailed(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, ErrBusy) || errors.Is(err, ErrTooMany) || errors.Is(err, ErrClosed)
}
