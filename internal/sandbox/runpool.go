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
	shape.Command, shape.Env = nil, m.cfg.PoolSpec.Env
	shape.Limits.Timeout = m.cfg.PoolSpec.Limits.Timeout
	return shape
}

// runPooled is a one-shot run in a box the pool built ahead, then thrown
// away: a fresh sandbox as Run promises, without the build in the run's
// time. It is a session exec, as runOnce is for runtimes, so timeouts
// and kills behave as there.
func (m *Manager) runPooled(ctx context.Context, box Box, ws string, s spec.Spec, stdin io.Reader, live Stream) (spec.Result, error) {
	defer m.discardBox(box, ws)
	timeout := s.Limits.Timeout
	if timeout <= 0 {
		timeout = spec.MaxTimeout
	}
	env := slices.Clone(s.Env)
	r, err := box.Exec(ctx, Command{Argv: s.Command, Env: env, Stdin: stdin, Timeout: timeout}, live)
	r.Network = box.NetworkEvents()
	return r, err
}
