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
	if err := s.freeze(ctx); err != nil {
		return err
	}
	s.paused = true
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
	s.paused, s.resumed = false, time.Now()
	return nil
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
		return s.f.Pause(ctx)
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
		return s.f.Resume(ctx)
	}
	return s.f.Cgroup.Thaw()
}

// resumeToEnd lets a paused box's processes go on to their end, at the
// start of teardown: a frozen process handles no signal, SIGKILL
// included, until it is thawed, so the box's init would never exit.
// Where the host holds the box's cgroup, every process in it is killed
// first, so none runs again; a runtime's box (gVisor, Docker) is resumed
// and then ended as a running one.
func (s *Session) resumeToEnd() error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if !s.paused {
		return nil
	}
	s.paused = false
	if s.f.Resume == nil {
		return errors.Join(s.f.Cgroup.Kill(), s.f.Cgroup.Thaw())
	}
	ctx, cancel := context.WithTimeout(context.Background(), resumeToEndWait)
	defer cancel()
	return s.f.Resume(ctx)
}

// resumeToEndWait bounds the resume of a paused runtime box at its end;
// the backend's own kill follows whatever it answers.
const resumeToEndWait = 10 * time.Second
