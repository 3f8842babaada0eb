package sandbox

import (
	"context"
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

// Fork makes count new sessions for owner from the current files of
// session id: each a fresh box of the same spec (template, limits,
// network, env, idle timeout, auto-pause and auto-snapshot) with a copy of its /workspace,
// its own id, the rest of the source's TTL, fresh processes and its own
// pacer. The source is snapshotted for the copy if it is not already
// (taking a snapshot slot and its charge of the budget until the forks are made) and left in the state
// it was in. Nothing of the source's memory is copied, so there is no
// random state or secret in memory to reseed: every new session starts
// its processes fresh; except from a snapshot that kept the box's memory
// (forkMemory), where each copy is restored from it and its Python
// interpreters' random state reseeded. If any new session cannot be
// made, none is kept.
func (m *Manager) Fork(ctx context.Context, owner, id string, count int) ([]Info, error) {
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
	src, drop, err := m.forkSource(ctx, s)
	if err != nil {
		return nil, err
	}
	defer drop()
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

// forkSource is a snapshot of s's files to copy from, and what to call
// once the copies are made: s's own snapshot if it is snapshotted,
// pinned until then (a resume or a Delete meanwhile removes it only
// after), else a new one taken from its paused box, which holds one of
// s's owner's snapshot slots and its charge of the budget until then.
func (m *Manager) forkSource(ctx context.Context, s *session) (src forkFrom, done func(), err error) {
	s.pauseMu.Lock()
	if s.currentState() == StateSnapshotted {
		s.mu.Lock()
		src = forkFrom{name: s.snap, memory: s.snapMemory > 0, recs: s.snapInterps}
		s.mu.Unlock()
		unpin := m.pinSnapshot(src.name, s.id)
		s.pauseMu.Unlock()
		return src, unpin, nil
	}
	s.pauseMu.Unlock()
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
// (and resuming it after).
func (m *Manager) copyForFork(ctx context.Context, s *session) (string, snapshot.Stats, error) {
	wasPaused := s.currentState() == StatePaused
	if !wasPaused {
		if err := m.pauseForCopy(ctx, s); err != nil {
			return "", snapshot.Stats{}, err
		}
	}
	name, stats, err := m.captureFork(ctx, s)
	if !wasPaused {
		m.undoCopyPause(ctx, s, "fork's copy")
	}
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
