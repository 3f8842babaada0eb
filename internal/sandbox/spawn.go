package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// spawnLimit bounds the start of a spawned process, so a box that never
// reports the start cannot hold its caller forever. A box's Spawn uses its
// context for the start only (the agent kills a process whose context
// ends before it runs, and nothing after): the process outlives it.
const spawnLimit = 30 * time.Second

// Spawn starts c in owner's session beside its execs and interpreters and
// returns at once, with the process running: unlike Exec it neither waits
// for the end nor kills what the process leaves running, and it does not
// make the session busy. The process runs until it ends, is killed, or its
// session ends (deleted, expired or died), whichever comes first; ctx
// bounds only the wait for the start (exec pacing included).
//
// c.Env is added to the session's environment, as an exec's env is, and
// c.Dir is a directory inside the sandbox (empty: /workspace). c.Files are
// the process's descriptors 0, 1, 2, ...; the caller still owns and closes
// them. A start is paced as a command exec (see execPacer) and marks the
// session used; the process's output is the caller's to read, and the
// returned Process's ChargeOutput charges the session's pacer for what the
// caller sent on.
func (m *Manager) Spawn(ctx context.Context, owner, id string, c interp.Command) (interp.Process, error) {
	s, err := m.lookup(owner, id)
	if err != nil {
		return nil, err
	}
	return s.spawn(ctx, c, m.cfg.OnCleanupError)
}

// Spawned is a process Manager.Spawn started: the box's process, and the
// session whose pacer its output is charged to.
type Spawned struct {
	interp.Process
	s *session
}

// ChargeOutput charges the session's exec pacer for n bytes of the
// process's output that the caller read and sent on, which cost the host
// CPU no cgroup counts, as an exec's output is charged (see outputCost).
// It never waits: the session's next exec or spawn does.
func (p *Spawned) ChargeOutput(n int) {
	p.s.pace.charge(n / outputBytesPerMS)
}

// spawn starts c in s; report is told of a kill at the session's end that
// failed.
func (s *session) spawn(ctx context.Context, c interp.Command, report func(error)) (interp.Process, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, fmt.Errorf("%w: no command given: name the program to run", spec.ErrInvalid)
	}
	if err := spec.ValidateEnv(c.Env); err != nil {
		return nil, err
	}
	if err := s.spawnable(); err != nil {
		return nil, err
	}
	if _, err := s.pace.wait(ctx, commandExecCost); err != nil {
		return nil, err
	}
	s.touch()
	c.Env = s.box.Env(c.Env...)
	startCtx, cancel := context.WithTimeout(ctx, spawnLimit)
	p, err := s.box.Spawn(startCtx, c)
	cancel()
	if err != nil {
		if s.ended() {
			return nil, fmt.Errorf("%w: session %s ended while the process started: %s", ErrClosed, s.id, deathCause(s.box))
		}
		return nil, fmt.Errorf("starting %s: %w", c.Argv[0], err)
	}
	go s.killAtEnd(p, report)
	return &Spawned{Process: p, s: s}, nil
}

// spawnable says why s cannot start a process, or nil: a ready or busy
// session can (a spawn runs beside an exec), a dead, stopping or gone one
// cannot, nor one whose sandbox has ended but is not yet reaped.
func (s *session) spawnable() error {
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	switch st {
	case StateReady, StateBusy:
	case StateDead:
		return s.deadError()
	default:
		return fmt.Errorf("%w: session %s is %s", ErrClosed, s.id, st)
	}
	select {
	case <-s.box.Done():
		return fmt.Errorf("%w: session %s has ended: %s", ErrClosed, s.id, deathCause(s.box))
	default:
	}
	return nil
}

// touch marks s used now, for its idle timeout.
func (s *session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// killAtEnd kills p when the session's sandbox ends first. Closing a box
// kills everything in it already; this makes the rule not depend on how
// each backend does it, and releases whoever waits on p.
func (s *session) killAtEnd(p interp.Process, report func(error)) {
	exited := make(chan struct{})
	go func() {
		_, _ = p.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-s.box.Done():
		if err := p.Kill(); err != nil {
			report(fmt.Errorf("killing a process of session %s at its end: %w", s.id, err))
		}
	}
}
