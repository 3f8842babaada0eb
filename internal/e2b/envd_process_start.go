package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	"github.com/warden-sandbox/warden/internal/drain"
	"github.com/warden-sandbox/warden/internal/e2b/processpb"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

const (
	// procReadChunk is the most output one data event carries, as envd's.
	procReadChunk = 32 << 10
	// procDrainGrace is how long output may keep coming after the process
	// ended, from what it left holding its pipes.
	procDrainGrace = 2 * time.Second
	// maxProcConfigBytes bounds what a Start asks for (its cmd, args,
	// envs, cwd and tag together), which the sandbox's table keeps while
	// the process lives and keepEndedProcs after, and List sends back:
	// without it 64 Starts of 2 MiB each made one List answer of 96 MB.
	// The SDKs send `/bin/bash -l -c COMMAND` with the caller's envs and
	// cwd, far below this for any command a person or a model writes; a
	// longer script goes in a file (files.write) that the command runs.
	maxProcConfigBytes = 64 << 10
)

// start checks req, starts its process in sb with the pipes it asks for,
// registers it in the sandbox's table and attaches the Start stream before any output can
// come, so that stream misses none.
func (ps *processService) start(ctx context.Context, sb *Sandbox, req *processpb.StartRequest) (*proc, *outCursor, error) {
	cmd, err := startCommand(req)
	if err != nil {
		return nil, nil, err
	}
	tb, err := ps.tables.reserve(sb)
	if err != nil {
		return nil, nil, err
	}
	pp, err := newProcPipes(req.Stdin == nil || req.GetStdin())
	if err != nil {
		ps.tables.unreserve(sb.ID, tb)
		return nil, nil, ps.internal("making a process's pipes", err)
	}
	cmd.Files = pp.child[:]
	box, err := ps.sessions.Spawn(ctx, sb.Owner, sb.ID, cmd)
	pp.closeChild()
	if err != nil {
		ps.tables.unreserve(sb.ID, tb)
		pp.closeHost()
		return nil, nil, spawnError(err)
	}
	p := &proc{
		tag: req.Tag, config: req.GetProcess(), configSize: procConfigSize(req), p: box, out: newOutputLog(keptOutput), stdin: pp.stdin,
		exited: make(chan struct{}), ended: make(chan struct{}),
	}
	tb.add(p)
	c, _ := p.out.attach(maxProcStreams) // a new log has room
	cpus := 0.0
	if info, err := ps.sessions.Get(ctx, sb.Owner, sb.ID); err == nil {
		cpus = info.Limits.CPUs
	}
	go ps.run(sb.ID, tb, p, pp, cpus)
	return p, c, nil
}

// startCommand is the box command req asks for: its program, arguments,
// variables (sorted, for a stable order) and working directory, mapped by
// the path rule. The user the request names (user or root, as the
// Authorization header) is not asked for: every process runs as the
// sandbox's one user.
func startCommand(req *processpb.StartRequest) (interp.Command, error) {
	pc := req.GetProcess()
	switch {
	case pc == nil || pc.GetCmd() == "":
		return interp.Command{}, connect.NewError(connect.CodeInvalidArgument, errors.New("no command given: set process.cmd to the program to run"))
	case req.Pty != nil:
		return interp.Command{}, errNoPTY
	}
	if n := procConfigSize(req); n > maxProcConfigBytes {
		return interp.Command{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(
			"process: cmd, args, envs, cwd and tag hold %d bytes, more than the %d allowed: write a long script to a file (files.write) and run that", n, maxProcConfigBytes))
	}
	c := interp.Command{Argv: append([]string{pc.GetCmd()}, pc.GetArgs()...)}
	for _, k := range slices.Sorted(maps.Keys(pc.GetEnvs())) {
		if strings.Contains(k, "=") {
			return interp.Command{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("process.envs: the name %.100q has a '=': a variable's name cannot", k))
		}
		c.Env = append(c.Env, k+"="+pc.GetEnvs()[k])
	}
	if err := spec.ValidateEnv(c.Env); err != nil {
		return interp.Command{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("process.envs: %w", err))
	}
	if pc.Cwd != nil && pc.GetCwd() != "" {
		dir, err := boxPath(pc.GetCwd())
		if err != nil {
			return interp.Command{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("process.cwd: %w", err))
		}
		c.Dir = dir
	}
	return c, nil
}

// procConfigSize is how many bytes of strings a Start asks the table to
// keep: its cmd, args, envs (names and values), cwd and tag.
func procConfigSize(req *processpb.StartRequest) int {
	pc := req.GetProcess()
	n := len(pc.GetCmd()) + len(pc.GetCwd()) + len(req.GetTag())
	for _, a := range pc.GetArgs() {
		n += len(a)
	}
	for k, v := range pc.GetEnvs() {
		n += len(k) + len(v)
	}
	return n
}

// spawnError maps an error of Sessions.Spawn to a Connect error: a program
// the box could not start is the caller's, the rest as connectError says.
func spawnError(err error) error {
	if msg := startFailure(err); msg != "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	}
	return connectError(err)
}

// run reads p's output into its log until the pipes end, waits for p's
// end, then records it, moves p to the ended, and forgets it keepEndedProcs
// later.
func (ps *processService) run(id string, tb *procTable, p *proc, pp *procPipes, cpus float64) {
	var readers sync.WaitGroup
	stop := make(chan struct{})
	var pipes []*drain.Pipe
	for i, f := range []*os.File{pp.stdout, pp.stderr} {
		pipe, err := drain.New(f, p.exited, cpus) // takes f over
		if err != nil {
			ps.log.Error("e2b: reading a process's output", "pid", p.pid, "err", err)
			continue
		}
		pipes = append(pipes, pipe)
		readers.Go(func() { ps.readOutput(pipe, p, i == 1, stop, tb.discards) })
	}
	st, werr := p.p.Wait()
	close(p.exited)
	waitOrStop(&readers, procDrainGrace, stop, pipes)
	for _, pipe := range pipes {
		pipe.Close()
	}
	p.end = procEndEvent(st, werr)
	p.out.close()
	close(p.ended)
	if err := p.closeStdin(); err != nil {
		ps.log.Warn("e2b: closing an ended process's stdin", "pid", p.pid, "err", err)
	}
	tb.retire(p)
	ps.later(keepEndedProcs, func() {
		tb.forget(p)
		ps.tables.drop(id, tb)
	})
}

// readOutput copies a pipe into the log until its end or stop. While no
// stream is attached and the log is full, it throws output away unread,
// each time after a turn of the sandbox's discards (see procTable), so a
// flood nobody reads costs the host little, however many processes make
// it, and pays for what it throws away as for output sent (see follow),
// so a flood nobody reads is paced as one read is; while a stream is
// attached it waits for room, and the process blocks on its full pipe.
func (ps *processService) readOutput(pipe *drain.Pipe, p *proc, stderr bool, stop <-chan struct{}, turns *rate.Limiter) {
	out, exited := p.out, p.exited
	buf := make([]byte, procReadChunk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-exited:
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	for {
		if out.full() {
			_ = turns.Wait(ctx) // fails only once the process has ended: drain at once
			if !out.full() {    // a stream attached meanwhile
				continue
			}
			n, err := pipe.Discard()
			out.discarded(n)
			if err != nil {
				return
			}
			_ = p.pay(ctx, int(n)) // fails only once the process has ended
			continue
		}
		n, err := pipe.Read(buf)
		if n > 0 && !out.add(outChunk{stderr: stderr, data: slices.Clone(buf[:n])}, stop) {
			select {
			case <-stop:
				return
			default:
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				ps.log.Warn("e2b: reading a process's output", "err", err)
			}
			return
		}
	}
}

// waitOrStop waits for the readers, at most grace after the process's
// end: what it left running may hold its pipes, and a stream attached but
// not reading may hold a reader, and the end must wait for neither.
func waitOrStop(readers *sync.WaitGroup, grace time.Duration, stop chan struct{}, pipes []*drain.Pipe) {
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		close(stop)
		for _, pipe := range pipes {
			pipe.Close()
		}
		<-done
	}
}

// pay takes from p's session's pacer what n bytes of output sent on or
// thrown away cost, waiting for it while ctx allows, where the box's
// process can pay (see sandbox.Spawned.PayOutput).
func (p *proc) pay(ctx context.Context, n int) error {
	if c, ok := p.p.(interface {
		PayOutput(context.Context, int) error
	}); ok {
		return c.PayOutput(ctx, n)
	}
	return nil
}

// closeStdin closes p's stdin, once.
func (p *proc) closeStdin() error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}
