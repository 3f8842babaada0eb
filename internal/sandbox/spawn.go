package sandbox

import (
	"context"
	"fmt"
	"sync/atomic"
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
// returns at once, with the process running: unlike Exec it does not wait
// for the end, and it does not make the session busy. The process runs
// until it ends, is killed, or its session ends (deleted, expired or
// died), whichever comes first; ctx bounds only the wait for the start
// (exec pacing included). As for an exec's command, what the process
// leaves running in its own group and cgroup is killed when it ends.
//
// c.Env is added to the session's environment, as an exec's env is, and
// c.Dir is a directory inside the sandbox (empty: /workspace). c.Files are
// the process's descriptors 0, 1, 2, ...; the caller still owns and closes
// them. A start is paced as a command exec (see execPacer) and marks the
// session used, and so does the process while it runs (every quarter of
// the idle timeout, a second to a minute), as an exec keeps its session
// busy. The process's output is the caller's to read, and the returned
// Process's PayOutput takes from the session's pacer what sending it on
// costs, waiting for it, so that output is paced as an exec's is.
func (m *Manager) Spawn(ctx context.Context, owner, id string, c interp.Command) (interp.Process, error) {
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if err := m.resumeIfPaused(ctx, s); err != nil {
		return nil, err
	}
	backend := m.backend.Name()
	return s.spawn(ctx, c, func(err error) {
		m.cfg.Logger.Warn("killing a spawned process at its session's end", "session", id, "backend", backend, "err", err)
	})
}

// Spawned is a process Manager.Spawn started: the box's process, and the
// session whose pacer its output is charged to.
type Spawned struct {
	interp.Process
	s *session
	// unpaid is output bytes reported but below a token's worth yet.
	unpaid atomic.Int64
}

// PayOutput takes from the session's exec pacer what n bytes of the
// process's output cost the host to send on (or to throw away), CPU no
// cgroup counts, at an exec's output's rate (see outputCost), waiting for
// the tokens while ctx allows; it answers ctx's error if ctx ends first.
// The caller pays before it sends, so a process whose output is paid for
// faster than the pace allows fills its pipe and blocks: only recording
// the debt let one `yes` cost the host twice its session's pace. Bytes
// below a token's worth are carried to the next call, so output sent in
// small pieces is paid for too.
func (p *Spawned) PayOutput(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	total := p.unpaid.Add(int64(n))
	tokens := total / outputBytesPerMS
	if tokens == 0 {
		return nil
	}
	p.unpaid.Add(-tokens * outputBytesPerMS)
	return p.s.pace.take(ctx, int(tokens))
}

// Terminate asks the process to end with SIGTERM, which it may catch to
// clean up, where the box can send it (Warden's agent can); elsewhere it
// kills the process, as Kill does.
func (p *Spawned) Terminate() error {
	if t, ok := p.Process.(interface{ Terminate() error }); ok {
		return t.Terminate()
	}
	return p.Kill()
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
	defer s.started()
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
	go s.watch(p, report)
	return &Spawned{Process: p, s: s}, nil
}

// spawnable says why s cannot start a process, or nil: a ready or busy
// session can (a spawn runs beside an exec), a dead, stopping, paused or
// gone one cannot, nor one whose sandbox has ended but is not yet reaped.
// On nil the spawn counts as starting, which refuses a pause until its
// started call.
func (s *session) spawnable() error {
	s.mu.Lock()
	st := s.state
	if st == StateReady || st == StateBusy {
		s.starting++
	}
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
		s.started()
		return fmt.Errorf("%w: session %s has ended: %s", ErrClosed, s.id, deathCause(s.box))
	default:
	}
	return nil
}

// started ends a spawn's start, counted by spawnable.
func (s *session) started() {
	s.mu.Lock()
	s.starting--
	s.mu.Unlock()
}

// touch marks s used now, for its idle timeout.
func (s *session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// watch keeps s used while p runs, as an exec keeps its session busy, so
// a long command is not taken for idleness (the TTL still ends it), and
// kills p when the session's sandbox ends first. Closing a box kills
// everything in it already; the kill makes the rule not depend on how
// each backend does it, and releases whoever waits on p.
func (s *session) watch(p interp.Process, report func(error)) {
	s.mu.Lock()
	every := min(max(s.idle/4, time.Second), time.Minute)
	s.mu.Unlock()
	tick := time.NewTicker(every)
	defer tick.Stop()
	s.keepUsed(p, tick.C, report)
}

// keepUsed is watch's loop, marking s used at each tick: tests drive it
// with their own ticks rather than waiting on a clock.
func (s *session) keepUsed(p interp.Process, tick <-chan time.Time, report func(error)) {
	exited := make(chan struct{})
	go func() {
		// Only the end matters here; the exec's own caller reads how.
		_, _ = p.Wait()
		close(exited)
	}()
	for {
		select {
		case <-exited:
			s.touch()
			return
		case <-tick:
			s.touch()
		case <-s.box.Done():
			if err := p.Kill(); err != nil {
				report(err)
			}
			return
		}
	}
}
