package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
)

// Pausing a session stops every process of its box where it stands (see
// Box.Pause), keeping its memory: its interpreters' variables, its
// background processes, its files. A paused session gives back its run
// slot (--max-sessions) and holds one of the paused ones (--max-paused)
// instead; it keeps its share of its owner's memory budget, which its
// box still holds. Its idle timer stops while it is paused; its TTL
// still ends it.
//
// A session running an exec is not paused: the exec's timeout is a
// wall-clock promise the agent keeps, and a frozen exec would either
// overrun it or be killed for time it never had. The caller is told to
// pause once the exec ends. Nor is one starting a spawned process: the
// frozen box could not answer the start, whose caller would wait on it.

// Pause pauses one of owner's sessions for its user; pausing one its
// user paused already does nothing. One paused only for a snapshot's or
// a fork's copy (Info.CopyPaused) is made its user's: it then stays
// paused once the copy ends, and needs a --max-paused slot for that
// (ErrTooMany at the cap leaves it to the copy, which resumes it).
// It is paced as a command exec (see execPacer): a runtime's pause is a
// runsc process or an Engine call, host CPU no cgroup counts.
func (m *Manager) Pause(ctx context.Context, owner, id string) (Info, error) {
	return m.switchPaced(ctx, owner, id, m.pause)
}

// Resume resumes one of owner's paused or snapshotted sessions (see
// Snapshot); resuming a running one does nothing. It needs a run slot,
// as a Create does, and is paced as Pause is (a resume on the way to an
// exec is paid for by the exec).
func (m *Manager) Resume(ctx context.Context, owner, id string) (Info, error) {
	return m.switchPaced(ctx, owner, id, m.resumeAny)
}

// resumeAny resumes s from a snapshot or from a pause, whichever it is in
// once s's pauseMu is free: a snapshot that held it may have moved s
// from paused to snapshotted meanwhile.
func (m *Manager) resumeAny(ctx context.Context, s *session) error {
	if s.currentState() == StateSnapshotted {
		return m.resumeSnapshot(ctx, s)
	}
	err := m.resume(ctx, s)
	if errors.Is(err, errSnapshotted) {
		return m.resumeSnapshot(ctx, s)
	}
	return err
}

// errSnapshotted is resume's answer for a session snapshotted while it
// waited: resumeAny resumes it from its snapshot instead, and a caller
// undoing its own pause leaves it snapshotted.
var errSnapshotted = fmt.Errorf("%w: the session was snapshotted", ErrClosed)

// switchPaced finds owner's session id, charges its pacer a command exec
// and pauses or resumes it (to).
func (m *Manager) switchPaced(ctx context.Context, owner, id string, to func(context.Context, *session) error) (Info, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return Info{}, err
	}
	if _, err := s.pace.wait(ctx, commandExecCost); err != nil {
		return Info{}, err
	}
	if err := to(ctx, s); err != nil {
		return Info{}, err
	}
	return s.info(), nil
}

// MaxPaused is how many sessions may be paused at once.
func (m *Manager) MaxPaused() int { return m.cfg.MaxPaused }

// pause moves s from ready to paused: it takes a paused slot, stops the
// box, and only then gives back its run slot. One paused for a copy
// (pauseForCopy) is paused by its user from then on (takeOverCopyPause).
func (m *Manager) pause(ctx context.Context, s *session) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if taken, err := m.takeOverCopyPause(s); taken {
		return err
	}
	_, err := m.pauseBox(ctx, s, nil)
	return err
}

// copyPause is one pause of a running session for copies of its files
// (pauseForCopy), told apart from its user's: held counts the copies
// under way in it (s.mu guards it), and the last to end resumes the
// session if it is still in this pause. A Pause meanwhile (its user's or
// auto-pause's) takes it over, a Resume (or an exec) ends it, and so does
// a snapshot that succeeds: the copies then leave the session as it is.
// A fresh one per pause, so a copy never resumes a later pause.
type copyPause struct{ held int }

// pauseForCopy pauses running s for a snapshot's or a fork's copy of its
// files, or joins the copy pause it is in; cp is for undoCopyPause once
// the copy ends, nil where s was paused by its user or snapshotted (the
// copy leaves it so). s keeps its run slot and takes no paused slot, so
// a failed copy always finds the slot to resume in (see resume); a
// snapshot that succeeds gives the run slot back.
func (m *Manager) pauseForCopy(ctx context.Context, s *session) (cp *copyPause, err error) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if cp := s.joinCopyPause(); cp != nil {
		return cp, nil
	}
	cp = &copyPause{held: 1}
	paused, err := m.pauseBox(ctx, s, cp)
	if !paused {
		return nil, err // paused by its user, or snapshotted, before: left so
	}
	return cp, nil
}

// joinCopyPause is the copy pause s is in, held once more, or nil.
func (s *session) joinCopyPause() *copyPause {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.copyPausedLocked() {
		return nil
	}
	s.copyPause.held++
	return s.copyPause
}

// copyPausedLocked says s is paused only for a copy (see copyPause);
// s.mu is held.
func (s *session) copyPausedLocked() bool {
	return s.state == StatePaused && s.copyPause != nil
}

// errCopyPauseLeft marks a Pause that could not take over a copy's pause
// (see takeOverCopyPause): the copy's end resumes the session, so
// auto-pause tries again at its next round rather than ending it.
var errCopyPauseLeft = errors.New("it stays paused for its copy, which resumes it once ended")

// takeOverCopyPause makes the copy pause s is in, if any, its user's
// pause, as pauseBox would have paused it: s takes a paused slot and
// gives back the run slot the copy kept, and the copies, once ended,
// leave it paused. Its PausedAt is the user's pause from then on. taken
// says s was in one; s.pauseMu is held.
func (m *Manager) takeOverCopyPause(s *session) (taken bool, err error) {
	s.mu.Lock()
	in := s.copyPausedLocked()
	if in {
		err = s.deadLocked()
	}
	s.mu.Unlock()
	if !in || err != nil {
		return in, err
	}
	if err := m.takePaused(s.owner); err != nil {
		return true, fmt.Errorf("%w; %w", err, errCopyPauseLeft)
	}
	if err := m.settlePause(s, nil); err != nil {
		m.givePaused(s.owner)
		return true, err
	}
	return true, nil
}

// pauseBox pauses running s, for its user (cp nil: s takes a paused slot
// and gives back its run slot) or in copy pause cp (it keeps its run slot
// and takes no paused slot); paused says it paused s, which was not
// paused or snapshotted already. s.pauseMu is held.
func (m *Manager) pauseBox(ctx context.Context, s *session, cp *copyPause) (paused bool, err error) {
	if done, err := s.toPausing(); done || err != nil {
		return false, err
	}
	takePaused, givePaused := m.takePaused, m.givePaused
	if cp != nil {
		takePaused, givePaused = func(string) error { return nil }, func(string) {}
	}
	if err := takePaused(s.owner); err != nil {
		s.unpause(false)
		return false, err
	}
	if err := s.box.Pause(ctx); err != nil {
		givePaused(s.owner)
		if errors.Is(err, ErrPauseUnknown) {
			return false, m.buryUnsure(s, "pausing", err)
		}
		s.unpause(false)
		return false, boxError(s.id, "pausing", err)
	}
	if err := m.settlePause(s, cp); err != nil {
		// Deleted or expired meanwhile: its end thaws and kills the box.
		givePaused(s.owner)
		return false, err
	}
	return true, nil
}

// settlePause records paused s as in copy pause cp, keeping its run
// slot, or (cp nil) as its user's, holding the paused slot its caller
// took and giving back the run slot; an s that ended meanwhile is
// refused and left as it is. s.pauseMu is held.
func (m *Manager) settlePause(s *session, cp *copyPause) error {
	s.mu.Lock()
	if s.state != StatePaused {
		s.mu.Unlock()
		return fmt.Errorf("%w: session %s ended while it was being paused", ErrClosed, s.id)
	}
	release := s.slot && cp == nil
	s.slot, s.pausedSlot, s.pausedAt, s.copyPause = s.slot && cp != nil, cp == nil, time.Now(), cp
	m.saveLocked(s)
	s.mu.Unlock()
	if release {
		m.release(s.owner, 0)
	}
	return nil
}

// buryUnsure ends s, whose box's pause or resume failed half way: it may
// run while counted as paused (holding no run slot, its idle timer
// stopped) or be frozen while counted as running, so neither is trusted
// and the session ends, failing closed. The host detail is logged; the
// caller is told in one line.
func (m *Manager) buryUnsure(s *session, doing string, err error) error {
	m.cfg.Logger.Warn("a pause or resume failed half way; ending the session", "session", s.id, "backend", m.backend.Name(), "err", err)
	m.bury(s, doing+" the sandbox failed and left it in an unknown state")
	return fmt.Errorf("%w: session %s ended: %s its sandbox failed and left it in an unknown state", ErrDead, s.id, doing)
}

// PauseError is a box's failed pause or resume: its full line, for the
// operator, may name host cgroup paths, runsc's output or the Engine's
// socket; Public is the one line for the tenant.
type PauseError struct {
	public string
	err    error
	// unsupported says the box cannot be paused at all: the error is
	// then errors.ErrUnsupported too, which front ends answer with 501.
	unsupported bool
}

// Is makes a PauseError of a box that cannot pause errors.ErrUnsupported.
func (e *PauseError) Is(target error) bool {
	return e.unsupported && target == errors.ErrUnsupported
}

func (e *PauseError) Error() string  { return e.err.Error() }
func (e *PauseError) Unwrap() error  { return e.err }
func (e *PauseError) Public() string { return e.public }

// boxError wraps the box's error for session id's pause or resume (doing)
// as a PauseError.
func boxError(id, doing string, err error) error {
	e := &PauseError{
		public: fmt.Sprintf("%s session %s failed; it is as it was: retry later", doing, id),
		err:    fmt.Errorf("%s session %s: %w", doing, id, err),
	}
	if errors.Is(err, ErrUnsupported) {
		e.public, e.unsupported = fmt.Sprintf("session %s cannot be paused on this server (see warden doctor's pause line)", id), true
	}
	return e
}

// toPausing marks s paused, before its box is, so no exec begins while
// it freezes; done says s was paused already. A busy session is refused.
func (s *session) toPausing() (done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deadLocked(); err != nil {
		return false, err
	}
	switch s.state {
	case StateSnapshotted:
		if s.forkHeld {
			return false, fmt.Errorf("%w: session %s is being forked and runs on after; pause it once the fork has answered", ErrBusy, s.id)
		}
		return true, nil
	case StatePaused:
		return true, nil
	case StateReady:
		if s.starting > 0 {
			return false, fmt.Errorf("%w: session %s is starting a process; pause it once the process has started", ErrBusy, s.id)
		}
		s.state = StatePaused
		return false, nil
	case StateBusy:
		return false, fmt.Errorf("%w: session %s is running an exec; pause it once the exec ends", ErrBusy, s.id)
	}
	return false, fmt.Errorf("%w: session %s is %s", ErrClosed, s.id, s.state)
}

// unpause moves a paused s back to ready, unless it began ending; used
// says whether that counts as use for the idle timeout.
func (s *session) unpause(used bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StatePaused {
		s.state = StateReady
		s.pausedAt = time.Time{}
	}
	if used {
		s.lastUsed = time.Now()
	}
}

// resume moves s from paused to ready: it takes a run slot (unless s
// kept its own, paused for a copy), lets the box run again, and gives
// back the paused slot. It ends a copy pause too: the copies then leave
// s running.
func (m *Manager) resume(ctx context.Context, s *session) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	return m.resumeLocked(ctx, s)
}

// resumeLocked is resume with s.pauseMu held.
func (m *Manager) resumeLocked(ctx context.Context, s *session) error {
	if paused, err := s.isPaused(); !paused || err != nil {
		return err
	}
	kept := s.holdsSlot()
	if !kept {
		if err := m.takeSlot(s.owner); err != nil {
			return err
		}
	}
	giveSlot := func() {
		if !kept {
			m.release(s.owner, 0)
		}
	}
	if err := s.box.Resume(ctx); err != nil {
		giveSlot()
		if errors.Is(err, ErrPauseUnknown) {
			return m.buryUnsure(s, "resuming", err)
		}
		return boxError(s.id, "resuming", err)
	}
	s.mu.Lock()
	if s.state != StatePaused {
		s.mu.Unlock()
		giveSlot()
		return fmt.Errorf("%w: session %s ended while it was being resumed", ErrClosed, s.id)
	}
	pausedSlot := s.pausedSlot
	s.state, s.slot, s.pausedSlot, s.pausedAt, s.lastUsed = StateReady, true, false, time.Time{}, time.Now()
	s.copyPause = nil
	m.saveLocked(s)
	s.mu.Unlock()
	if pausedSlot {
		m.givePaused(s.owner)
	}
	return nil
}

// holdsSlot says s holds a run slot.
func (s *session) holdsSlot() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slot
}

// resumeIfPaused resumes s if it is paused or snapshotted, for a call
// that needs its box running; any other state is left for that call to
// judge.
func (m *Manager) resumeIfPaused(ctx context.Context, s *session) error {
	switch s.currentState() {
	case StatePaused, StateSnapshotted:
		return m.resumeAny(ctx, s)
	}
	return nil
}

// isPaused says s is paused, or why it cannot be resumed: nil for a
// running one, which needs nothing.
func (s *session) isPaused() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deadLocked(); err != nil {
		return false, err
	}
	switch s.state {
	case StatePaused:
		return true, nil
	case StateReady, StateBusy:
		return false, nil
	case StateSnapshotted:
		return false, errSnapshotted
	}
	return false, fmt.Errorf("%w: session %s is %s", ErrClosed, s.id, s.state)
}

// takePaused takes one of the paused slots for owner (see takeCounted).
func (m *Manager) takePaused(owner string) error {
	return m.takeCounted(&m.paused, m.cfg.MaxPaused, owner)
}

// givePaused gives back one of owner's paused slots.
func (m *Manager) givePaused(owner string) { m.giveCounted(&m.paused, owner) }

// takeSlot takes a run slot for a session resuming: the same limits as a
// Create's, but no start token (nothing is built) and no more of the
// memory budget (the paused box held it all along).
func (m *Manager) takeSlot(owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: the server is shutting down", ErrClosed)
	}
	if m.active >= m.cfg.MaxSessions {
		return fmt.Errorf("%w: resuming needs a run slot and the server is at its limit of sessions and runs (set by --max-sessions); pause or delete another session, or retry later", ErrTooMany)
	}
	if n := m.byOwner[owner]; m.cfg.MaxPerOwner > 0 && n >= m.cfg.MaxPerOwner {
		return fmt.Errorf("%w: resuming needs a run slot and this key holds %d sessions and runs, its limit (set by --max-sessions-per-key); pause or delete another session first",
			ErrTooMany, n)
	}
	m.active++
	m.byOwner[owner]++
	return nil
}

// giveBack gives back whatever slot s holds, run, paused or snapshot,
// once it ends.
func (m *Manager) giveBack(s *session) {
	s.mu.Lock()
	slot, paused, snap := s.slot, s.pausedSlot, s.snapSlot
	s.slot, s.pausedSlot, s.snapSlot = false, false, false
	s.mu.Unlock()
	if slot {
		m.release(s.owner, 0)
	}
	if paused {
		m.givePaused(s.owner)
	}
	if snap {
		m.giveSnapshotSlot(s.owner)
	}
}

// saveLocked writes s's record after a pause or resume, with s.mu held
// so a Delete racing with it (which removes the record) is never undone;
// a failure only makes a crash recover an older state, and is reported.
func (m *Manager) saveLocked(s *session) {
	if m.cfg.Store == nil {
		return
	}
	if err := m.cfg.Store.SaveSession(m.recordLocked(s)); err != nil {
		m.cfg.OnStoreError(fmt.Errorf("saving session %s: %w", s.id, err))
	}
}

// autoPauseWait bounds the reaper's pause of an idle auto-pause session.
const autoPauseWait = 10 * time.Second

// autoSnapshotWait bounds the reaper's snapshot of an idle auto-snapshot
// session, which copies its files: one that takes longer ends as idle.
const autoSnapshotWait = 5 * time.Minute

// autoPause pauses s, idle past its timeout, instead of ending it. It
// says whether s ends instead, as idle, as one without auto-pause would:
// only when it cannot be paused (no paused slot left, a backend or host
// that cannot). Any other failure (an exec begun meanwhile, a runtime
// that failed and undid the pause, no paused slot for one a copy paused
// meanwhile, which the copy's end resumes) leaves s for the reaper's
// next round.
//
// A session with auto-snapshot is snapshotted instead (see
// Manager.Snapshot) and ends on any failure but a busy session or one
// ending: a failure of the copy, which the sandbox's own files may cause
// (a file over its disk limit), would fail every round after too. A
// wait for a copy slot that runs out is busy: it retries.
func (m *Manager) autoPause(s *session) (end bool) {
	ctx, cancel := context.WithTimeout(context.Background(), autoPauseWait)
	defer cancel()
	s.mu.Lock()
	snap := s.autoSnapshot
	s.mu.Unlock()
	var err error
	switch {
	case snap && m.cfg.Snapshots == nil:
		err = fmt.Errorf("%w: no state directory for snapshots", ErrUnsupported)
	case snap:
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), autoSnapshotWait)
		defer cancel()
		err = m.snapshot(ctx, s, SnapshotOptions{Memory: true})
	default:
		err = m.pause(ctx, s)
	}
	if err == nil {
		return false
	}
	if autoPauseEnds(snap, err) {
		m.cfg.Logger.Info("auto-pause cannot pause; the idle session ends instead", "session", s.id, "backend", m.backend.Name(), "err", err)
		return true
	}
	m.cfg.Logger.Info("auto-pause failed; retrying at the next round", "session", s.id, "backend", m.backend.Name(), "err", err)
	return false
}

// autoPauseEnds says whether err, from an auto-pause (or, with snap, an
// auto-snapshot), ends the idle session rather than leaving it for the
// next round (see autoPause).
func autoPauseEnds(snap bool, err error) bool {
	if errors.Is(err, errCopyPauseLeft) {
		return false
	}
	if snap && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrClosed) {
		return true
	}
	return errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooMany) || errors.Is(err, state.ErrStorage) || errors.Is(err, spec.ErrInvalid)
}
