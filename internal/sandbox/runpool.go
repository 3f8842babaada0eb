package sandbox

import (
	"context"
	"io"
	"slices"

	"github.com/warden-sandbox/warden/internal/spec"
)

// runShape is what a one-shot run of s needs of a pooled box: the same
// limits and network, whatever its command, environment and timeout,
// which a box takes per exec.
func (m *Manager) runShape(s spec.Spec) spec.Spec {
	shape := s
	shape.Command, shape.Env = nil, m.poolSpec.Env
	shape.Limits.Timeout = m.poolSpec.Limits.Timeout
	return shape
}

// runPooled is a one-shot run in a box the pool built ahead, then thrown
// away: a fresh sandbox as Run promises, without the build in the run's
// time. It is a session exec, as runOnce is for runtimes, so timeouts
// and kills behave as there. The box is closed after the answer, in the
// background; owner's slot is given back with the answer, as a fresh
// run's is, so a caller at its limit can send the next run at once.
func (m *Manager) runPooled(ctx context.Context, owner string, box Box, ws string, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	defer m.release(owner, m.charge(s.Limits))
	defer m.discardLater(box, ws)
	timeout := s.Limits.Timeout
	if timeout <= 0 {
		timeout = spec.MaxTimeout
	}
	env := slices.Clone(s.Env)
	r, err := box.Exec(ctx, Command{Argv: s.Command, Env: env, Stdin: stdin, Timeout: timeout}, live)
	r.Network = box.NetworkEvents()
	return r, err
}

// discardLater throws a used box away in the background; once the
// Manager is closing it does so at once, so Close never misses one.
func (m *Manager) discardLater(box Box, ws string) {
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.discards.Add(1)
	}
	m.mu.Unlock()
	if closed {
		m.discardBox(box, ws)
		return
	}
	go func() {
		defer m.discards.Done()
		m.discardBox(box, ws)
	}()
}
