package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/drain"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// ExecSpec is one command run in a session.
type ExecSpec struct {
	// Command is the program and its arguments.
	Command []string
	// Env is added to the session's environment.
	Env []string
	// Dir is the working directory; empty means /workspace.
	Dir string
	// Timeout bounds this command alone; zero means the session's
	// Limits.Timeout. At the timeout the command and every process it
	// started are killed; the session lives on.
	Timeout time.Duration
}

// drainGrace is how long output may keep flowing after the command ended,
// from processes that held its pipes and are being killed.
const drainGrace = 2 * time.Second

// Exec runs one command in the session and reports it like Run does. When
// the command ends, whatever it left running is killed: an exec is one
// unit of work, and nothing of it outlives its Result.
func (s *Session) Exec(ctx context.Context, e ExecSpec, stdio IO) (spec.Result, error) {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return spec.Result{}, fmt.Errorf("%w: no command given", spec.ErrInvalid)
	}
	if err := spec.ValidateEnv(e.Env); err != nil {
		return spec.Result{}, err
	}
	timeout := e.Timeout
	if timeout == 0 {
		timeout = s.f.Spec.Limits.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	x, err := newExecPipes(stdio.Stdin != nil)
	if err != nil {
		return spec.Result{}, descriptorError(err)
	}
	defer x.close()
	begin := time.Now()
	p, err := s.launch(ctx, interp.Command{Argv: e.Command, Env: s.Env(e.Env...), Dir: e.Dir, Files: x.child[:]})
	x.closeChild()
	var start *StartError
	if errors.As(err, &start) {
		return spec.Result{ExitCode: start.Code, Stderr: "warden: " + start.Message + "\n", WallTimeMS: ms(time.Since(begin))}, nil
	}
	if err != nil {
		return spec.Result{}, err
	}
	launched := time.Since(begin)
	limit := s.f.Spec.Limits.OutputBytes
	out := &Capture{limit: limit, live: stdio.Stdout}
	errOut := &Capture{limit: limit, live: stdio.Stderr}
	drained, err := x.drain(out, errOut, stdio.Stdin, p.done, s.f.Spec.Limits.CPUs)
	if err != nil {
		s.kill(p)
		<-p.done
		return spec.Result{}, err
	}
	r := spec.Result{}
	select {
	case <-p.done:
	case <-ctx.Done():
		r.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		s.kill(p)
		<-p.done
	}
	r.WallTimeMS = ms(time.Since(begin))
	// Split for --verbose: the spawn's round trip to the agent's started
	// event (its lockdown, fork and exec) against the process's run.
	s.log().Debug("exec timed", "launch_ms", ms(launched), "run_ms", r.WallTimeMS-ms(launched))
	x.finishDrain(drained)
	return s.execResult(r, p, out, errOut, ctx.Err())
}

func (s *Session) execResult(r spec.Result, p *Process, out, errOut *Capture, ctxErr error) (spec.Result, error) {
	st, err := p.Wait()
	if err != nil {
		return r, err
	}
	cpu, peak, ooms := p.usage()
	r.CPUTimeMS, r.PeakMemoryBytes, r.OOMKilled = ms(cpu), peak, ooms > 0
	switch {
	case r.TimedOut:
		r.ExitCode, r.Signal = 128+int(syscall.SIGKILL), "SIGKILL"
	case ctxErr != nil:
		return r, fmt.Errorf("exec canceled before the command ended: %w", ctxErr)
	default:
		r.ExitCode, r.Signal = st.Code, spec.SignalName(st.Signal)
	}
	r.Stdout, r.StdoutTruncated = out.buf.String(), out.truncated
	r.Stderr, r.StderrTruncated = errOut.buf.String(), errOut.truncated
	return r, nil
}

// execPipes are one command's standard streams: child ends for the
// sandbox, host ends here.
type execPipes struct {
	child                  [3]*os.File
	stdinW, stdout, stderr *os.File
	// outPipe and errPipe read stdout and stderr once drain took them over.
	outPipe, errPipe *drain.Pipe
}

func newExecPipes(withStdin bool) (*execPipes, error) {
	x := &execPipes{}
	var err error
	if withStdin {
		x.child[0], x.stdinW, err = os.Pipe()
	} else {
		x.child[0], err = os.Open(os.DevNull)
	}
	if err == nil {
		x.stdout, x.child[1], err = os.Pipe()
	}
	if err == nil {
		x.stderr, x.child[2], err = os.Pipe()
	}
	if err != nil {
		x.close()
		return nil, fmt.Errorf("creating the command's pipes: %w", err)
	}
	return x, nil
}

func (x *execPipes) closeChild() {
	for i, f := range x.child {
		if f != nil {
			f.Close()
			x.child[i] = nil
		}
	}
}

func (x *execPipes) close() {
	x.closeChild()
	for _, f := range []*os.File{x.stdinW, x.stdout, x.stderr} {
		if f != nil {
			f.Close()
		}
	}
	for _, p := range []*drain.Pipe{x.outPipe, x.errPipe} {
		if p != nil {
			p.Close()
		}
	}
}

// drain copies stdin in and both outputs out until their writers close;
// ended is closed when the command has ended, and cpus is the session's
// CPU quota, which sets the pace (see package drain).
func (x *execPipes) drain(out, errOut *Capture, stdin io.Reader, ended <-chan struct{}, cpus float64) (*sync.WaitGroup, error) {
	var err error
	// drain.New closes the file it is given, even when it fails.
	x.outPipe, err = drain.New(x.stdout, ended, cpus)
	x.stdout = nil
	if err != nil {
		return nil, err
	}
	x.errPipe, err = drain.New(x.stderr, ended, cpus)
	x.stderr = nil
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); out.Drain(x.outPipe) }()
	go func() { defer wg.Done(); errOut.Drain(x.errPipe) }()
	if x.stdinW != nil {
		w := x.stdinW
		x.stdinW = nil
		go func() {
			// The program may stop reading at any time; its stdin's end
			// is not the host's to report.
			_, _ = io.Copy(w, stdin)
			w.Close()
		}()
	}
	return &wg, nil
}

// finishDrain waits for the outputs' ends, for at most drainGrace: a
// process that left the command's group and cgroup may hold a pipe open,
// and the Result must not wait for it.
func (x *execPipes) finishDrain(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(drainGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		x.outPipe.Close()
		x.errPipe.Close()
		<-done
	}
}

// kill kills p, logging a kill that could not be delivered: p still ends
// with the box, whose connection is then gone.
func (s *Session) kill(p *Process) {
	if err := p.Kill(); err != nil {
		s.log().Warn("killing an exec", "err", err)
	}
}
