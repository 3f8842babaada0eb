package agent

import (
	"syscall"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// Terminate sends SIGTERM to the process's group through the agent,
// asking it to end: unlike Kill the process may catch it to clean up, or
// ignore it, so nothing waits for its end, and what left the group or
// stays in the process's cgroup is not reached (Kill reaches both). It
// first waits for the agent to report the start or the end, as Kill
// does: before that the agent may not know the group yet.
func (p *Process) Terminate() error {
	select {
	case <-p.started:
	case <-p.done:
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.s.send(nsinit.Request{Op: nsinit.OpKill, ID: p.id, Signal: int(syscall.SIGTERM)}, nil, false)
}
