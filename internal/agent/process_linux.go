package agent

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
)

// Process is one process a Session started. It implements interp.Process.
type Process struct {
	s  *Session
	id uint64
	// cg is the process's own cgroup (v1), or nil.
	cg cgroup.Cgroup
	// countsSession says the process's OOM kills are the session
	// cgroup's during its life, from oomBase (see sessionOOMs): a stream
	// session's process, whose base could be read.
	countsSession bool
	oomBase       uint64
	// countsGuest says the process's OOM kills are the rise of the count
	// its box reports (Frame.GuestOOMs) from oomBase: the highest count
	// known when it was sent, raised to its started event's count.
	countsGuest bool

	started chan struct{}
	done    chan struct{}
	once    sync.Once
	// watchOnce starts the one watchKill of the process's first Kill.
	watchOnce sync.Once

	mu     sync.Mutex
	pid    int
	status *nsinit.Status
	stats  cgroup.Stats
	// rusage figures from the agent, the fallback for missing stats.
	cpuUS, rssKiB int64
}

// Spawn starts c in the sandbox. It returns once the process runs, or with
// an error (a *StartError when the program could not be started).
func (s *Session) Spawn(ctx context.Context, c interp.Command) (interp.Process, error) {
	p, err := s.launch(ctx, c)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// StartError is a program that could not be started in the sandbox: not
// found, not executable, a bad working directory. Code is what a shell
// would exit with (127 or 126).
type StartError struct {
	Code    int
	Message string
}

func (e *StartError) Error() string { return e.Message }

func (s *Session) launch(ctx context.Context, c interp.Command) (*Process, error) {
	p, err := s.request(c)
	if err != nil {
		return nil, err
	}
	return p, p.awaitStart(ctx)
}

// request registers a process for c and sends its spawn, holding holdMu
// shared, so none starts while WhilePaused runs. It counts itself in
// s.finishing from its first check of the session's end, made under s.mu
// before Done can close, so teardown waits for it as for endWith's
// settles (a settle teardown missed would strand the exec cgroup after
// teardown took the stranded ones); and it checks again before it
// registers the process, since the session may have ended while its
// cgroup was made: endWith settles only the processes registered when it
// ran, so one registered after would wait for ever.
func (s *Session) request(c interp.Command) (*Process, error) {
	s.holdMu.RLock()
	defer s.holdMu.RUnlock()
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, fmt.Errorf("no command given")
	}
	if len(c.Files) < 3 {
		return nil, fmt.Errorf("a process needs at least stdin, stdout and stderr, got %d files", len(c.Files))
	}
	s.mu.Lock()
	if err := s.endedLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.finishing.Add(1)
	defer s.finishing.Done()
	s.nextID++
	p := &Process{s: s, id: s.nextID, started: make(chan struct{}), done: make(chan struct{})}
	stranded := len(s.stranded) > 0
	s.mu.Unlock()
	if stranded {
		s.clearStranded()
	}

	cg, tasks, err := s.execCgroup(p.id)
	if err != nil {
		return nil, descriptorError(err)
	}
	if s.requestHook != nil {
		s.requestHook()
	}
	// Published only now, with its cgroup set: from here on events and
	// Usage may read it.
	p.cg = cg
	if cg == nil && s.f.Stream && s.f.Cgroup != nil {
		p.oomBase, p.countsSession = s.sessionOOMs()
	}
	s.mu.Lock()
	if err := s.endedLocked(); err != nil {
		s.mu.Unlock()
		closeFDs(tasks)
		p.settle(nil, nsinit.Event{}) // removes its exec cgroup
		return nil, err
	}
	if s.f.GuestOOMs {
		p.oomBase, p.countsGuest = s.guestOOMs, true
	}
	s.procs[p.id] = p
	s.seen[p.id] = Pending{}
	s.mu.Unlock()
	req := nsinit.Request{Op: nsinit.OpSpawn, ID: p.id, Argv: c.Argv, Env: c.Env, Dir: c.Dir}
	if s.f.Stream {
		err = s.sendFailed(s.sendStream(req, c.Files, p.done))
	} else {
		err = s.sendSpawn(req, c.Files, tasks)
	}
	if err != nil {
		s.forget(p)
		p.settle(nil, nsinit.Event{})
		return nil, descriptorError(err)
	}
	return p, nil
}

// endedLocked is the error a request gets once the session has ended or
// is closing, else nil; s.mu is held.
func (s *Session) endedLocked() error {
	switch {
	case s.err != nil:
		return s.err
	case s.closed:
		return ErrSessionEnded
	}
	return nil
}

// sendSpawn sends a spawn with files, the process's fds, attached, and
// tasks, its exec cgroup's tasks files (then closed), if any.
func (s *Session) sendSpawn(req nsinit.Request, files []*os.File, tasks []int) error {
	defer closeFDs(tasks)
	fds := make([]int, 0, len(files)+len(tasks))
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	req.Files = len(files)
	if len(tasks) > 0 {
		fds = append(fds, tasks...)
		req.Cgroup = 2 * len(tasks)
	}
	return s.send(req, fds, len(tasks) > 0)
}

// sessionOOMs is the session cgroup's OOM kills so far. A process
// of a stream session, which has no cgroup of its own, counts those
// during its life as its own: exact for one exec at a time; a kill in
// another exec running beside it is reported by both.
// ok is false (and the error logged) when they could not be read.
func (s *Session) sessionOOMs() (n uint64, ok bool) {
	st, err := s.f.Cgroup.Stats()
	if err != nil {
		s.log().Warn("reading the session cgroup's OOM kills; an exec's report leaves them out", "err", err)
		return 0, false
	}
	return st.OOMKills, true
}

// oomsSince is the OOM kills counted from base to now, or 0 when now
// could not be read (ok false) or is below base (a counter that went
// back), rather than a false kill or an underflow.
func oomsSince(base, now uint64, ok bool) uint64 {
	if !ok || now < base {
		return 0
	}
	return now - base
}

// forget drops a process the agent never heard of: an event for it
// breaks the protocol.
func (s *Session) forget(p *Process) {
	s.mu.Lock()
	delete(s.procs, p.id)
	delete(s.seen, p.id)
	s.mu.Unlock()
}

// awaitStart waits for the agent to say the process runs or could not
// start. A context that ends first kills it.
func (p *Process) awaitStart(ctx context.Context) error {
	select {
	case <-p.started:
	case <-p.done:
	case <-ctx.Done():
		p.s.kill(p)
		<-p.done
		return fmt.Errorf("starting process: %w", ctx.Err())
	}
	select {
	case <-p.done:
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.status == nil:
		return p.s.Err()
	case p.status.StartFailed:
		return &StartError{Code: p.status.ExitCode, Message: p.status.Error}
	}
	return nil
}

// markStarted records the process's pid and, for a box that counts its
// own OOM kills, the count its agent read just before the fork.
func (p *Process) markStarted(pid int, ooms uint64) {
	p.mu.Lock()
	p.pid = pid
	if p.countsGuest {
		p.oomBase = max(p.oomBase, ooms)
	}
	p.mu.Unlock()
	select {
	case <-p.started:
	default:
		close(p.started)
	}
}

// settle records the end (st is nil when the session ended first), reads
// the process's cgroup figures, kills what it left behind there and
// removes the cgroup, then releases its waiters.
func (p *Process) settle(st *nsinit.Status, e nsinit.Event) {
	p.once.Do(func() {
		if p.countsSession {
			now, ok := p.s.sessionOOMs()
			ooms := oomsSince(p.oomBase, now, ok)
			p.mu.Lock()
			p.stats.OOMKills = ooms
			p.mu.Unlock()
		}
		if p.cg != nil {
			stats := p.s.retire(p.cg)
			p.mu.Lock()
			p.stats = stats
			p.mu.Unlock()
			p.s.mu.Lock()
			p.s.settledOOMs += stats.OOMKills
			p.s.mu.Unlock()
		}
		p.mu.Lock()
		p.status, p.cpuUS, p.rssKiB = st, e.CPUTimeUS, e.MaxRSSKiB
		if p.countsGuest {
			p.stats.OOMKills = oomsSince(p.oomBase, e.OOMKills, st != nil)
		}
		p.mu.Unlock()
		close(p.done)
	})
}

// Wait blocks until the process has ended. Its error is set when the
// session ended first, so there is no status to report.
func (p *Process) Wait() (interp.ExitStatus, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == nil {
		return interp.ExitStatus{Code: 128 + int(unix.SIGKILL), Signal: int(unix.SIGKILL)}, p.s.Err()
	}
	return interp.ExitStatus{Code: p.status.ExitCode, Signal: p.status.Signal}, nil
}

// Kill sends SIGKILL to the process's group through the agent, and to
// everything in its cgroup, which also finds what left the group. It
// first waits for the agent to report the start or the end: before that
// the agent may not know the group yet and drop the kill, and its spawning
// thread may still be in the cgroup, where the cgroup's kill would end the
// agent itself. The box has killGrace from the call to report the
// process's end (see watchKill), so that wait and one after Kill are
// bounded.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	// A cut stream takes no kill and brings no end: a watch would blame
	// the box for the silence.
	if cut, err := p.s.quiescedNow(); cut {
		return err
	}
	p.watchOnce.Do(func() { go p.watchKill() })
	select {
	case <-p.started:
	case <-p.done:
		return nil
	}
	err := p.s.send(nsinit.Request{Op: nsinit.OpKill, ID: p.id, Signal: int(syscall.SIGKILL)}, nil, false)
	if p.cg != nil {
		if cerr := p.cg.Kill(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// killGrace is how long a box has to report the end of a process the
// host killed. The agent reports it as soon as it reaps the process, which
// SIGKILL makes prompt; a box that stays silent longer would otherwise
// hold its exec, and whoever waits on it, for the session's whole life.
const killGrace = 5 * time.Second

// watchKill waits killGrace for the end of p, which the host has killed.
// A box that does not report it within that breaks the protocol: it is
// killed and the session ends with the reason, which releases p and
// everyone waiting on it.
//
// A paused box cannot report anything (its agent is frozen): the grace
// counts from the box's resume, so a kill sent to a paused box (an E2B
// command's, say) is answered after the resume rather than taken for a
// silent agent.
func (p *Process) watchKill() {
	grace := time.NewTimer(killGrace)
	defer grace.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-grace.C:
		}
		left := p.s.sinceRunning(killGrace)
		if left <= 0 {
			break
		}
		grace.Reset(left)
	}
	p.s.breach(fmt.Errorf("%w: did not report process %d's end within %d s of its kill",
		nsinit.ErrProtocol, p.id, killGrace/time.Second))
}

// usage is the process's CPU time and peak memory: its cgroup's figures
// where it had one, its rusage otherwise.
func (p *Process) usage() (cpu time.Duration, peak int64, ooms uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cpu, peak, ooms = p.stats.CPUTime, p.stats.PeakMemoryBytes, p.stats.OOMKills
	if cpu == 0 {
		cpu = time.Duration(p.cpuUS) * time.Microsecond
	}
	if peak == 0 {
		peak = p.rssKiB * 1024
	}
	return cpu, peak, ooms
}
