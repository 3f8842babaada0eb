package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
)

// StartSession builds a sandbox from s (its Command is ignored) and returns
// once the agent inside is ready. ctx bounds the start only.
func (rt Runtime) StartSession(ctx context.Context, s spec.Spec) (*agent.Session, error) {
	if err := s.ValidateSandbox(); err != nil {
		return nil, err
	}
	if err := rt.AgentTransport.Validate(); err != nil {
		return nil, err
	}
	if rt.ListenerStdin != nil {
		return nil, errors.New("a listener as stdin is for one-shot runs only: a session's agent has its own standard streams; leave Runtime.ListenerStdin unset")
	}
	stream := rt.AgentTransport == TransportStream
	b := &box{spec: &s, session: true, rt: rt}
	if err := b.prepare(); err != nil {
		b.cleanup()
		return nil, err
	}
	cfg := b.config()
	cfg.Stream = stream
	proc, err := startInit(b)
	if err != nil {
		b.cleanup()
		return nil, err
	}
	b.child.close()
	// On v1 the cgroup is made here, while the init boots. An init that
	// ended before taking it is explained by Attach, from its answer.
	if err := b.handOver(cfg); err != nil {
		proc.kill() // a no-op when the init has ended, as initEnded says
		if !initEnded(err) {
			<-proc.exited
			b.cleanup()
			return nil, err
		}
	}
	exited, ended, code := watchExit(proc)
	f := agent.Frame{
		Spec: s, Control: b.ctlHost, Stream: stream, Cgroup: b.cg, UID: b.ids.uid, GID: b.ids.gid, Egress: b.egress,
		// Over the stream the file API goes through the agent, the path
		// a Pod's files take, so native proves and measures it.
		FilesByAgent:  stream,
		Env:           b.env,
		Log:           b.log(),
		OpenWorkspace: func() (*os.File, error) { return openInitWorkspace(proc) },
		Kill:          proc.kill,
		Exited:        exited,
		Ended:         ended,
		ExitCode:      code,
		Cleanup: func() {
			b.ctlHost = nil // the session closed it
			b.cleanup()
		},
	}
	return agent.Attach(ctx, f)
}

// watchExit returns a channel closed once the init has been reaped, and
// how it ended and its exit code (-1 for a signal), valid once that
// channel is closed.
func watchExit(p *initProc) (<-chan struct{}, func() string, func() int) {
	c := make(chan struct{})
	var how string
	code := -1
	go func() {
		e := <-p.exited
		how, code = e.String(), e.Status.ExitStatus()
		close(c)
	}()
	return c, func() string { return how }, func() int { return code }
}

// openInitWorkspace opens the sandbox's /workspace through the init's root
// and then checks, through the init's pidfd, that the init is still there:
// a pid is not reused before its process is reaped, so the descriptor is
// this sandbox's workspace and no one else's, which a path looked up later
// could not promise.
func openInitWorkspace(p *initProc) (*os.File, error) {
	path := "/proc/" + strconv.Itoa(p.pid) + "/root/workspace"
	f, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := p.signal(syscall.Signal(0)); err != nil {
		f.Close()
		return nil, fmt.Errorf("the sandbox ended: %w", err)
	}
	return f, nil
}
