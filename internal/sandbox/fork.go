package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
)

// MaxFork bounds the sessions one Fork makes; the session caps
// (--max-sessions, per key, the memory budget) bound them too.
const MaxFork = 16

// Fork makes count new sessions for owner from session id: each a fresh
// box of the same spec (template, limits, network, env, idle timeout,
// auto-pause and auto-snapshot) with a copy of its /workspace, its own
// id, the rest of the source's TTL and its own pacer. What else a copy
// gets is one rule: with o.Memory, the source's memory where it is kept
// (a snapshot that kept it) or can be saved (forkSaved: a running
// source on a backend that saves boxes whole), each copy restored from
// it (forkMemory) and its interpreters' random state reseeded; else,
// and wherever the memory cannot be had, its files only, its processes
// started fresh. The source ends in the state it was in: a running one
// is paused for a copy of its files, or snapshotted with its memory
// keeping its run slot, and resumed once the forks are made; a paused
// one is copied paused (files only: see forkSource); a snapshotted one
// stays so. A server that keeps files only (Config.FilesOnlySnapshots)
// forks files only. A copy taken for the fork holds a snapshot slot and its
// charge of the budget until the forks are made. If any new session
// cannot be made, none is kept.
func (m *Manager) Fork(ctx context.Context, owner, id string, count int, o ForkOptions) ([]Info, error) {
	if count < 1 || count > MaxFork {
		return nil, fmt.Errorf("%w: count %d is out of range: fork makes 1 to %d sessions at once", spec.ErrInvalid, count, MaxFork)
	}
	if err := m.refuseRemote("fork"); err != nil {
		return nil, err
	}
	if m.cfg.Snapshots == nil {
		return nil, fmt.Errorf("%w: fork needs a state directory for its snapshot: start warden serve with --state-dir", ErrUnsupported)
	}
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.pace.wait(ctx, commandExecCost); err != nil {
		return nil, err
	}
	src, drop, err := m.forkSource(ctx, s, o)
	if err != nil {
		return nil, err
	}
	defer drop()
	// The source's save outlives a caller that went away (forkSaved);
	// the copies are not made for it: nobody would learn of them.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("forking session %s: %w", s.id, err)
	}
	infos, errs := make([]Info, count), make([]error, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, forkParallel)
	for i := range count {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			infos[i], errs[i] = m.forkOne(ctx, s, src)
		})
	}
	wg.Wait()
	// The first failure says why; the others are most likely the same.
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		err := errs[i]
		for i, made := range infos {
			if errs[i] != nil {
				continue
			}
			if derr := m.Delete(context.Background(), owner, made.ID); derr != nil {
				m.cfg.Logger.Warn("removing a fork after another failed", "session", made.ID, "err", derr)
			}
		}
		return nil, fmt.Errorf("forking session %s: %w", s.id, err)
	}
	return infos, nil
}

// forkParallel is how many forks are made at once: each is mostly a copy
// of files, which a few in parallel make faster without taking every
// core of the host.
const forkParallel = 4

// forkFrom is the snapshot a Fork copies from: its name, whether it
// holds the box's memory, and the interpreters to adopt from it, read
// once so that every copy of one Fork is made alike, even if the source
// is resumed meanwhile (its pinned snapshot stays).
type forkFrom struct {
	name   string
	memory bool
	recs   []state.Interpreter
}

// forkSource is a snapshot of s to copy from, and what to call once the
// copies are made: s's own snapshot if it is snapshotted, pinned until
// then (a resume or a Delete meanwhile removes it only after), its
// memory copied only if o asks; else, where o asks for memory, s runs
// and its box can be saved whole, a snapshot of s with its memory
// (forkSaved); else, or should that save fail (logged once), a new
// snapshot of s's files taken from its paused box, which holds one of
// s's owner's snapshot slots and its charge of the budget until then.
// A paused s is never saved whole: that would leave it snapshotted,
// holding a snapshot slot and its charge until its next use, or need a
// run slot, which a paused session gave back, to restore and pause it
// again; its files are copied from its paused box, left as it was.
func (m *Manager) forkSource(ctx context.Context, s *session, o ForkOptions) (src forkFrom, done func(), err error) {
	if src, unpin, ok := m.forkSnapshotted(s); ok {
		src.memory = src.memory && o.Memory
		return src, unpin, nil
	}
	if o.Memory && s.currentState() != StatePaused && m.savesMemoryOf(s) {
		src, done, err := m.forkSaved(ctx, s)
		if err == nil || forkSavedFailed(ctx, err) {
			return src, done, err
		}
		// A refused save (errNoMemory) has said why in the log already.
		if !errors.Is(err, errNotRunning) && !errors.Is(err, errNoMemory) {
			m.cfg.Logger.Warn("saving a session's memory for a fork failed; the forks get its files only", "session", s.id, "err", err)
		}
	}
	if err := m.takeSnapshotSlot(s.owner); err != nil {
		return forkFrom{}, nil, err
	}
	name, stats, err := m.copyForFork(ctx, s)
	if err != nil {
		m.giveSnapshotSlot(s.owner)
		return forkFrom{}, nil, err
	}
	m.chargeBytes(s.owner, stats.Charge())
	return forkFrom{name: name}, func() {
		m.dropSnapshot(name, s.id)
		m.unchargeBytes(s.owner, stats.Charge())
		m.giveSnapshotSlot(s.owner)
	}, nil
}

// copyForFork snapshots s's files, pausing it for the copy if it runs
// (and resuming it after, unless its user paused it meanwhile: see
// undoCopyPause).
func (m *Manager) copyForFork(ctx context.Context, s *session) (string, snapshot.Stats, error) {
	cp, err := m.pauseForCopy(ctx, s)
	if err != nil {
		return "", snapshot.Stats{}, err
	}
	step("copy paused")
	name, stats, err := m.captureFork(ctx, s)
	m.undoCopyPause(ctx, s, cp, "fork's copy")
	return name, stats, err
}

// captureFork copies paused s's files into a snapshot no record names
// (a crash leaves it for the next server's sweep, so it is not fsync'd).
func (m *Manager) captureFork(ctx context.Context, s *session) (string, snapshot.Stats, error) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if st := s.currentState(); st != StatePaused {
		return "", snapshot.Stats{}, fmt.Errorf("%w: session %s was resumed or ended while it was being forked; retry", ErrBusy, s.id)
	}
	m.beginCopy(s)
	defer s.endCopy()
	return m.capture(ctx, s, s.currentBox(), m.cfg.Snapshots.BeginTemporary, nil)
}

// forkOne makes one session like s from snapshot src.
func (m *Manager) forkOne(ctx context.Context, s *session, src forkFrom) (Info, error) {
	s.mu.Lock()
	o := SessionOptions{
		Limits: s.spec.Limits, Network: s.spec.Network, Env: s.spec.Env, IdleTimeout: s.idle,
		TTL: max(time.Until(s.expires), time.Second), Template: s.spec.Root.Template, AutoPause: s.autoPause,
		AutoSnapshot: s.autoSnapshot,
	}
	s.mu.Unlock()
	o.TTL = min(o.TTL, m.cfg.MaxTTL)
	if src.memory {
		if f := m.forkMemory(ctx, s, o, src); f != nil {
			return f.info(), nil
		}
	}
	in, err := m.Create(ctx, s.owner, o)
	if err != nil {
		return Info{}, err
	}
	f, err := m.lookupCtx(ctx, s.owner, in.ID)
	if err != nil {
		return Info{}, err // deleted meanwhile: nothing to end
	}
	if err := m.restoreFiles(ctx, f, f.currentBox(), f.spec.Limits, src.name); err != nil {
		m.end(f)
		return Info{}, err
	}
	return f.info(), nil
}

// forkMemory makes one session like s from snapshot src's saved memory,
// if it has one: a box restored from it, its files the saved box's, the
// interpreters src names adopted and their random state reseeded (see
// reseed), all before the session can be found (List, Get, a run), so
// nothing runs in it before its reseed. It is nil where the snapshot
// has no memory, and where the restore fails (said in the log), so that
// the fork is made from the snapshot's files instead.
func (m *Manager) forkMemory(ctx context.Context, s *session, o SessionOptions, src forkFrom) *session {
	mb, ok := m.backend.(MemoryBackend)
	dir := m.cfg.Snapshots.MemoryPath(src.name)
	if !ok || dir == "" {
		return nil
	}
	var interps map[string]interp.Interpreter
	var procs map[string]*idSpawner
	logName := "fork of " + s.id
	f, err := m.create(ctx, s.owner, o, func(ctx context.Context, sp spec.Spec) (Box, string, error) {
		box, err := m.restoreSlotted(ctx, mb, sp, dir)
		if err != nil {
			return nil, "", err
		}
		interps, procs = m.adoptInterpreters(logName, box, sp, src.recs)
		rctx, cancel := context.WithTimeout(ctx, reseedWait)
		defer cancel()
		m.reseed(rctx, logName, interps, procs)
		step("fork reseeded")
		return box, "", nil
	}, func(f *session) {
		f.interps, f.interpProcs = interps, procs
	})
	if err != nil {
		m.cfg.Logger.Warn("forking a session from its saved memory failed; the fork gets its files only", "session", s.id, "snapshot", src.name, "err", err)
		return nil
	}
	return f
}

// reseedWait bounds the reseeding of one fork's interpreters.
const reseedWait = 30 * time.Second
