package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
)

// agentBox is a Box served by Warden's agent, whatever backend built it:
// every backend's boxes are this, and differ only in how they were made.
type agentBox struct{ *agent.Session }

func (b agentBox) Exec(ctx context.Context, c Command, live Stream) (spec.Result, error) {
	return b.Session.Exec(ctx, agent.ExecSpec{Command: c.Argv, Env: c.Env, Dir: c.Dir, Timeout: c.Timeout},
		agent.IO{Stdin: c.Stdin, Stdout: live.Stdout, Stderr: live.Stderr})
}

// Pause is the agent's, with a backend or host that cannot pause
// reported as ErrUnsupported.
func (b agentBox) Pause(ctx context.Context) error {
	err := b.Session.Pause(ctx)
	if errors.Is(err, agent.ErrCannotPause) {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return unsure(err)
}

// Resume is the agent's, with a box left half way reported as
// ErrPauseUnknown.
func (b agentBox) Resume(ctx context.Context) error {
	return unsure(b.Session.Resume(ctx))
}

// unsure marks err with ErrPauseUnknown when the agent says the box may
// be paused or running.
func unsure(err error) error {
	if errors.Is(err, agent.ErrStateUnknown) {
		return fmt.Errorf("%w: %w", ErrPauseUnknown, err)
	}
	return err
}

// AgentBox is the Box of an agent session a backend outside this package
// attached (kubernetes: a Pod's agent over TCP), so that its execs,
// interpreters and pause answer exactly as every other backend's.
func AgentBox(s *agent.Session) Box { return agentBox{s} }
