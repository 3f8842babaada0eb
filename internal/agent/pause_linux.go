package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// FreezeTimeout bounds how long a box's processes get to stop when the
// cgroup freezer pauses it: a box that a hostile process keeps from
// freezing (forking as fast as it can) is thawed again and the pause
// fails, rather than holding the caller.
const FreezeTimeout = 2 * time.Second

// ErrStateUnknown is wrapped by Pause's and Resume's error when a
// runtime's call failed and could not be undone: the box may be paused or
// running, and nothing that counts on either (a run slot given back, a
// request sent) may trust it. The caller ends the box.
var ErrStateUnknown = errors.New("the sandbox may be paused or running")

// RuntimeWait bounds one runtime pause or resume (runsc, the Docker
// Engine): they run apart from the caller's context, so a caller that
// goes away cannot leave the box half switched, and a runtime that hangs
// cannot hold the session.
const RuntimeWait = 10 * time.Second

// ErrCannotPause is wrapped by Pause's error when the box's backend or
// host has no way to stop a box and keep its memory.
var ErrCannotPause = errors.New("this sandbox cannot be paused")

// Pause stops every process of the box where it stands, the agent
// included, keeping their memory: a paused box uses no CPU until Resume.
// Nothing may be sent to the agent while it is paused (it would not read
// it, and the send would time out as a breach): the caller resumes first.
// Pausing a paused box does nothing.
func (s *Session) Pause(ctx context.Context) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if err := s.ifEnded(); err != nil {
		return err
	}
	if s.paused {
		return nil
	}
	s.unsure = true
	err := s.freeze(ctx)
	if err != nil {
		native := s.f.Resume == nil && !errors.Is(err, ErrCannotPause)
		s.unsure = native || errors.Is(err, ErrStateUnknown)
		return err
	}
	s.paused, s.unsure = true, false
	return nil
}

// Resume lets a paused box run again; a box that is not paused is left
// as it is.
func (s *Session) Resume(ctx context.Context) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if err := s.ifEnded(); err != nil {
		return err
	}
	if !s.paused {
		return nil
	}
	if err := s.thaw(ctx); err != nil {
		return err
	}
	s.paused, s.unsure, s.resumed = false, false, time.Now()
	return nil
}

// WhilePaused pauses the box (a paused one stays so) and runs fn while it
// stays paused, holding the pause throughout: Pause, Resume, the resume
// that ends a closed box (Close) and a new process (Spawn) wait until fn
// returns, so fn finds the box as still as it left it, and Running, read
// in fn, counts every process the session started. The caller must also
// hold its own calls on the box's files (the workspace API) meanwhile.
//
// When fn fails, a box WhilePaused paused is resumed. When fn returns
// saved true, the box is gone (a runtime saved and ended it): the session
// ends with ErrSaved, reported by Err, and is left for Close.
func (s *Session) WhilePaused(ctx context.Context, fn func() (saved bool, err error)) error {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if err := s.ifEnded(); err != nil {
		return err
	}
	was := s.paused
	if !was {
		s.unsure = true
		if err := s.freeze(ctx); err != nil {
			native := s.f.Resume == nil && !errors.Is(err, ErrCannotPause)
			s.unsure = native || errors.Is(err, ErrStateUnknown)
			return err
		}
		s.paused, s.unsure = true, false
	}
	saved, err := fn()
	if errors.Is(err, ErrStateUnknown) {
		s.unsure = true
	}
	switch {
	case saved:
		s.paused = false
		s.endWith(&endedError{cause: ErrSaved.Error(), final: true, is: ErrSaved})
	case err != nil && !was:
		if rerr := s.thaw(ctx); rerr != nil {
			s.unsure = true
			return errors.Join(err, fmt.Errorf("resuming the box: %w", rerr))
		}
		s.paused, s.resumed = false, time.Now()
	}
	return err
}

// ErrSaved is the cause of a session whose box a runtime saved and ended
// (WhilePaused).
var ErrSaved = errors.New("its box was checkpointed; restore the checkpoint to go on")

// Paused says the box is paused (Pause, and no Resume since).
func (s *Session) Paused() bool {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	return s.paused
}

// sinceRunning is how much of a grace d a wait on the box has left: all
// of it while the box is paused, the rest of d counted from its last
// resume, or nothing when it has run for d already.
func (s *Session) sinceRunning(d time.Duration) time.Duration {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if s.paused {
		return d
	}
	return d - time.Since(s.resumed)
}

// ifEnded is ErrSessionEnded once the session is closing or its box has
// ended.
func (s *Session) ifEnded() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	select {
	case <-s.done:
		closed = true
	default:
	}
	if closed {
		return ErrSessionEnded
	}
	return nil
}

func (s *Session) freeze(ctx context.Context) error {
	switch {
	case s.f.Pause != nil:
		return s.runtimePause(ctx)
	case s.f.Cgroup != nil:
		if err := s.f.Cgroup.Freeze(FreezeTimeout); err != nil {
			if errors.Is(err, errors.ErrUnsupported) {
				return fmt.Errorf("%w: %w", ErrCannotPause, err)
			}
			return err
		}
		return nil
	}
	return fmt.Errorf("%w: the box has no cgroup of its own to freeze (warden runs without a writable cgroup; see warden doctor)", ErrCannotPause)
}

func (s *Session) thaw(ctx context.Context) error {
	if s.f.Resume != nil {
		if err := runtimeCall(ctx, s.f.Resume); err != nil {
			return fmt.Errorf("%w: %w", ErrStateUnknown, err)
		}
		return nil
	}
	return s.f.Cgroup.Thaw()
}

// runtimePause pauses the box through its runtime; a pause that fails is
// undone with a resume, as the cgroup freezer thaws a box that will not
// stop, so the box is known to run: the runtime may have paused it
// before it failed (a timeout, an engine that paused but answered an
// error). When the resume fails too, the state is unknown.
func (s *Session) runtimePause(ctx context.Context) error {
	err := runtimeCall(ctx, s.f.Pause)
	if err == nil {
		return nil
	}
	if rerr := runtimeCall(ctx, s.f.Resume); rerr != nil {
		return fmt.Errorf("%w: pausing: %w; resuming again: %w", ErrStateUnknown, err, rerr)
	}
	return err
}

// runtimeCall runs a runtime's pause or resume apart from ctx's
// cancellation, within RuntimeWait.
func runtimeCall(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RuntimeWait)
	defer cancel()
	return call(ctx)
}

// resumeToEnd lets a paused box's processes go on to their end, at the
// start of teardown: a frozen process handles no signal, SIGKILL
// included, until it is thawed, so the box's init would never exit.
// Where the host holds the box's cgroup, every process in it is killed
// first, so none runs again; a runtime's box is resumed and then ended
// as a running one (Docker), unless its Kill ends a paused box itself
// (Frame.KillsPaused: gVisor).
//
// A box whose last pause or resume failed half way (unsure) is treated
// as paused: killing and thawing a running cgroup, or resuming a running
// runtime box, does no harm.
func (s *Session) resumeToEnd() error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if !s.paused && !s.unsure {
		return nil
	}
	s.paused, s.unsure = false, false
	if s.f.KillsPaused {
		return nil
	}
	if s.f.Resume == nil {
		return errors.Join(s.f.Cgroup.Kill(), s.f.Cgroup.Thaw())
	}
	return runtimeCall(context.Background(), s.f.Resume)
}
