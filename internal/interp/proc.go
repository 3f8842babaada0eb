package interp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bounds on waiting for a dying interpreter, so a Run never blocks forever
// even when a spawner or a leftover process misbehaves.
const (
	// exitGrace is how long to wait for the process to end after Kill.
	exitGrace = 5 * time.Second
	// spawnLimit bounds the spawn of an interpreter: the sandbox's word
	// that it runs, not the driver's start. A spawn that cannot be
	// cancelled with the Run that asks for it must still end.
	spawnLimit = 30 * time.Second
	// startupStderr is how much of the stderr of an interpreter that died
	// before it was ready goes into the error.
	startupStderr = 4 << 10
)

// proc is one live interpreter process and the goroutines that read it.
type proc struct {
	p      Process
	ctl    *os.File // requests, host end
	rep    *os.File // replies, host end
	stdout *pump
	stderr *pump
	// startErr holds the start of stderr until the driver is ready,
	// for the error when it dies first.
	startErr *limitedBuffer
	replies  chan reply // closed when the reply pipe ends
	quit     chan struct{}
	exited   chan struct{} // closed when Wait has returned
	status   ExitStatus    // valid once exited is closed
	stopped  sync.Once
}

// pipePair is a pipe whose child end is given to the interpreter.
type pipePair struct{ host, child *os.File }

// start spawns the interpreter with stdin at EOF, stdout and stderr on
// pumps, requests on descriptor 3 and replies on descriptor 4.
func start(ctx context.Context, lang *language, sp Spawner, env []string, cfg config) (*proc, error) {
	cmd := Command{
		Argv: append([]string{lang.program}, lang.args...),
		Env:  lang.environ(env),
		Dir:  cfg.dir,
	}
	return launch(lang, cfg, false, func(files []*os.File) (Process, error) {
		// The interpreter outlives the Run that starts it, so the spawn
		// must not be cancelled with that Run's context, but it is
		// bounded alone.
		spawnCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spawnLimit)
		defer cancel()
		cmd.Files = files
		p, err := sp.Spawn(spawnCtx, cmd)
		if err != nil {
			return nil, fmt.Errorf("spawning %s: %w", lang.program, err)
		}
		return p, nil
	})
}

// adopt takes over process id, a driver of lang a restored sandbox still
// runs, through ad, binding new pipes to its descriptors as start's
// spawn would; its stdin, at end of file since its start, is /dev/null
// now. Its driver said it was ready long ago.
func adopt(lang *language, ad Adopter, id uint64, cfg config) (*proc, error) {
	p, err := launch(lang, cfg, true, func(files []*os.File) (Process, error) {
		p, err := ad.Adopt(id, files)
		if err != nil {
			return nil, fmt.Errorf("adopting %s process %d: %w", lang.program, id, err)
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	p.stderr.disarm()
	return p, nil
}

// launch makes the interpreter's pipes, has get bind their child ends to
// a process (fds 0 to 4: stdin at end of file, or /dev/null when
// nullStdin, stdout, stderr, requests, replies) and starts reading it.
func launch(lang *language, cfg config, nullStdin bool, get func([]*os.File) (Process, error)) (*proc, error) {
	var pairs [5]pipePair // stdin, stdout, stderr, ctl, rep
	closeAll := func(hostToo bool) {
		for _, pp := range pairs {
			if pp.child != nil {
				pp.child.Close()
			}
			if hostToo && pp.host != nil {
				pp.host.Close()
			}
		}
	}
	for i := range pairs {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(true)
			return nil, fmt.Errorf("making pipes: %w", err)
		}
		if i == 0 || i == 3 {
			pairs[i] = pipePair{host: w, child: r}
		} else {
			pairs[i] = pipePair{host: r, child: w}
		}
		// Fd puts the child's end in blocking mode: the interpreter
		// expects ordinary blocking descriptors.
		pairs[i].child.Fd()
	}
	// Closing the stdin pipe's host end now makes every read of the
	// interpreter's stdin see end of file.
	pairs[0].host.Close()
	pairs[0].host = nil
	if nullStdin {
		null, err := os.Open(os.DevNull)
		if err != nil {
			closeAll(true)
			return nil, fmt.Errorf("opening %s: %w", os.DevNull, err)
		}
		pairs[0].child.Close()
		pairs[0].child = null
	}

	files := make([]*os.File, len(pairs))
	for i, pp := range pairs {
		files[i] = pp.child
	}
	process, err := get(files)
	closeAll(err != nil)
	if err != nil {
		return nil, err
	}
	startErr := &limitedBuffer{limit: startupStderr}
	exited := make(chan struct{})
	stdout, stderr, err := startPumps(pairs[1].host, pairs[2].host, startErr, exited, cfg.cpus)
	if err != nil {
		// The start failed already: that error is the one to report, and a
		// kill that fails means the process has ended; Wait only reaps it.
		_ = process.Kill()
		go func() { _, _ = process.Wait() }() // only reaps it
		for _, f := range []*os.File{pairs[3].host, pairs[4].host} {
			f.Close()
		}
		return nil, fmt.Errorf("reading %s's output: %w", lang.program, err)
	}
	p := &proc{
		p:        process,
		ctl:      pairs[3].host,
		rep:      pairs[4].host,
		stdout:   stdout,
		stderr:   stderr,
		startErr: startErr,
		replies:  make(chan reply),
		quit:     make(chan struct{}),
		exited:   exited,
	}
	go func() {
		p.status, _ = process.Wait()
		close(p.exited)
	}()
	go readReplies(p.rep, maxReplyLine(cfg), p.replies, p.quit)
	return p, nil
}

// startPumps starts the pumps of the interpreter's stdout and stderr; the
// start of stderr goes to startErr until the driver is ready. It takes
// over out and errOut: both are closed when it fails.
func startPumps(out, errOut *os.File, startErr io.Writer, exited <-chan struct{}, cpus float64) (*pump, *pump, error) {
	stdout, err := newPump(out, nil, exited, cpus)
	if err != nil {
		errOut.Close()
		return nil, nil, err
	}
	stderr, err := newPump(errOut, startErr, exited, cpus)
	if err != nil {
		stdout.close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// ready waits for the driver's "ready" reply. When the interpreter dies
// first, the error carries its exit status and the start of its stderr.
func (p *proc) ready(ctx context.Context) error {
	defer p.stderr.disarm()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case r, ok := <-p.replies:
		if ok && r.err == nil && r.T == "ready" {
			return nil
		}
		if ok && r.err != nil {
			return fmt.Errorf("%w: a reply that does not decode: %s", ErrProtocol, excerpt(r.err.Error()))
		}
		if ok {
			return fmt.Errorf("%w: driver sent %s before ready", ErrProtocol, excerpt(r.T))
		}
	case <-p.exited:
	}
	p.kill()
	st, _ := p.wait()
	<-awaitOrTimeout(p.stderr.eof, exitGrace)
	p.stderr.disarm()
	return fmt.Errorf("interpreter exited with status %d before it was ready: %s", st.Code, strings.TrimSpace(p.startErr.String()))
}

// kill ends the interpreter and everything it started; it does not wait.
func (p *proc) kill() {
	// It fails only once the process has ended, which wait reports.
	_ = p.p.Kill()
}

// wait returns the exit status once the process has ended, giving up
// after exitGrace.
func (p *proc) wait() (ExitStatus, bool) {
	select {
	case <-p.exited:
		return p.status, true
	case <-time.After(exitGrace):
		return ExitStatus{}, false
	}
}

// stop kills the interpreter and releases the pipes and goroutines.
func (p *proc) stop() {
	p.stopped.Do(func() {
		p.kill()
		p.wait()
		close(p.quit)
		p.ctl.Close()
		p.rep.Close()
		p.stdout.close()
		p.stderr.close()
	})
}

// awaitOrTimeout returns a channel closed when c is closed or after d.
func awaitOrTimeout(c <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-c:
		case <-t.C:
		}
	}()
	return out
}

// limitedBuffer keeps the first limit bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
