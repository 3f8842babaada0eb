package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/streammux"
)

// Session is a sandbox that outlives one program: its agent stays as PID 1
// and starts a process for each Spawn, under the same root, seccomp filter
// and limits, until Close. Where the box has a cgroup the host can divide
// (v1), every process gets a child cgroup of the session's, so it can be
// counted and killed alone.
type Session struct {
	f   Frame
	ctl int
	// workspace is the sandbox's /workspace (see Workspace).
	workspace *os.File
	// hierarchies (v1) is how many tasks files a cgroup has, fixed at start.
	hierarchies int

	// sendMu serialises requests and guards the descriptors they use:
	// ctl, the control socket's number, and sessionTasks, the session
	// cgroup's tasks files sent with each spawn for the agent's thread to
	// return to. teardown closes them under it, so no request can go to a
	// number the kernel has meanwhile given to another file.
	sendMu       sync.Mutex
	ctlClosed    bool
	sessionTasks []int
	// mux and ctlCh are the stream and its control channel, once started
	// (Frame.Stream), also guarded by sendMu.
	mux   *streammux.Mux
	ctlCh *streammux.Channel
	// held counts the stream channels only the host can free.
	held heldChannels
	// quiesced says Quiesce cut the stream for a checkpoint: no request
	// goes out any more (guarded by sendMu); quiesceAck is closed by
	// the agent's answer.
	quiesced bool
	// cutErr is EndCut's end of a quiesced session (guarded by sendMu).
	cutErr     error
	quiesceAck chan struct{}

	mu     sync.Mutex
	procs  map[uint64]*Process
	nextID uint64
	// seen holds the events (sawStarted, sawExited) each process the
	// agent was told of has reported, until it has reported all it may,
	// and over the stream the directions its fds were granted.
	seen map[uint64]Pending
	// live are the processes a restored agent listed as running over the
	// stream (Frame.ResumeNonce) and Adopt has not yet taken.
	live   map[uint64][]string
	closed bool
	// settledOOMs counts OOM kills in exec cgroups already removed.
	settledOOMs uint64
	// guestOOMs is the highest OOM kill count a GuestOOMs box reported.
	guestOOMs uint64
	// stranded are exec cgroups that could not be cleared for want of
	// descriptors (see retire).
	stranded []cgroup.Cgroup
	// cleanupErrs are cleanup failures teardown reports (see note), and
	// moreErrs counts those past the first maxNoted.
	cleanupErrs []error
	moreErrs    int

	// holdMu keeps new processes out while WhilePaused runs: each
	// request holds it shared while it registers and sends its process,
	// so requests stay concurrent and a slow send never holds pauseMu
	// (Close's thaw, Pause and Resume would wait behind it and the box be
	// blamed for the send's timeout); WhilePaused holds it alone, taken
	// before pauseMu.
	holdMu sync.RWMutex
	// pauseMu serialises Pause, Resume, WhilePaused and the resume at
	// teardown, and guards paused, which says the box is stopped (see
	// Pause), and resumed, when it last resumed.
	pauseMu sync.Mutex
	paused  bool
	resumed time.Time
	// unsure says the box's last pause failed half way: it may be
	// frozen, so teardown ends it as a paused one (see resumeToEnd).
	unsure bool

	// finishing counts processes whose cgroup is still being torn down,
	// and requests under way (see request).
	finishing sync.WaitGroup
	// requestHook, set only by tests, runs in request between the making
	// of the process's cgroup and its registration, where the session
	// may end.
	requestHook func()
	// done is closed when the agent is gone; err then says why.
	done     chan struct{}
	doneOnce sync.Once
	err      error
}

// ErrSessionEnded is returned by a Session whose sandbox has ended.
var ErrSessionEnded = errors.New("the sandbox has ended")

// Attach waits for the agent in f to say it is ready and returns the
// session it serves. ctx bounds the wait only. On failure everything in f
// is torn down, as Close would.
func Attach(ctx context.Context, f Frame) (*Session, error) {
	s := &Session{f: f, ctl: -1, procs: map[uint64]*Process{}, seen: map[uint64]Pending{}, done: make(chan struct{}), nextID: f.PriorIDs, quiesceAck: make(chan struct{})}
	if err := s.start(ctx); err != nil {
		if terr := s.teardown(); terr != nil {
			return nil, errors.Join(err, fmt.Errorf("tearing down the failed attach: %w", terr))
		}
		return nil, err
	}
	return s, nil
}

// sendTimeout bounds one request's wait for room in the control socket.
// Requests are small and the agent reads them as they come; a box that
// leaves them unread would otherwise hold send's lock, and with it every
// other request of the session, for ever.
const sendTimeout = 10 * time.Second

// boundSends makes a send that cannot go on within sendTimeout fail with
// EAGAIN, which send takes for a breach of the protocol.
func (s *Session) boundSends() error {
	tv := unix.NsecToTimeval(sendTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(s.ctl, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return fmt.Errorf("setting the control socket's send timeout: %w", err)
	}
	return nil
}

func (s *Session) start(ctx context.Context) error {
	if err := s.checkFrame(); err != nil {
		// No reader runs yet to end the session, which teardown awaits.
		s.end(err)
		return err
	}
	for id, p := range s.f.Prior {
		s.seen[id] = p
	}
	if !s.f.Stream {
		s.ctl = int(s.f.Control.Fd())
	}
	ready := make(chan error, 1)
	if s.f.Stream {
		if err := s.streamControl(); err != nil {
			// No reader started to end the session: teardown waits for it.
			s.end(err)
			return err
		}
		if s.f.Restored {
			if err := streammux.WriteResume(s.f.Control, s.f.ResumeNonce); err != nil {
				s.end(err)
				return err
			}
		}
		go s.readStreamEvents(ready, s.f.Control)
	} else {
		go s.readEvents(ready)
		if err := s.boundSends(); err != nil {
			return err
		}
	}
	var err error
	if s.f.Restored && !s.f.Stream {
		// A restored agent said it was ready before its checkpoint.
		return s.afterReady()
	}
	select {
	case err = <-ready:
		if errors.Is(err, errHungUp) {
			err = s.endedBeforeReady(ctx)
		}
	case <-s.f.Exited:
		// A runtime may end the box without its socket reporting EOF at
		// once (gVisor), so the box's end is watched too.
		err = s.lastWords(ready)
		if err == nil || errors.Is(err, errHungUp) {
			err = s.endedBeforeReady(ctx)
		}
	case <-ctx.Done():
		err = fmt.Errorf("starting the session: %w", ctx.Err())
	}
	if err != nil {
		return err
	}
	return s.afterReady()
}

// checkFrame refuses a Frame that cannot be: one counting OOM kills in
// two places, or a restored agent's over the stream.
func (s *Session) checkFrame() error {
	if s.f.GuestOOMs && s.f.Cgroup != nil {
		return errors.New("a session counts its OOM kills in the guest (GuestOOMs) or in a host cgroup, not both: attach it with one")
	}
	if s.f.Restored && s.f.Stream && len(s.f.ResumeNonce) != streammux.ResumeNonceLen {
		return fmt.Errorf("a restored agent over the stream needs the checkpoint's resume nonce of %d bytes (Session.Quiesce's)", streammux.ResumeNonceLen)
	}
	return s.f.Prior.check(s.f.PriorIDs)
}

// afterReady opens what the session needs of a box whose agent is ready.
func (s *Session) afterReady() error {
	if s.f.OpenWorkspace != nil {
		var err error
		if s.workspace, err = s.f.OpenWorkspace(); err != nil {
			return fmt.Errorf("opening the sandbox's workspace: %w", err)
		}
	}
	if s.f.Stream {
		// No tasks descriptor can reach the agent: execs get no cgroup
		// of their own (hierarchies stays 0).
		return nil
	}
	return s.openSessionTasks()
}

// lastWordsWait bounds the wait for what a box that has ended left in
// its socket; it is there already, if at all.
const lastWordsWait = time.Second

// lastWords is the agent's first answer when it came before its end (a
// refusal says more than the end does), or errHungUp.
func (s *Session) lastWords(ready <-chan error) error {
	wait := time.NewTimer(lastWordsWait)
	defer wait.Stop()
	select {
	case err := <-ready:
		return err
	case <-wait.C:
		return errHungUp
	}
}

// errHungUp is the agent closing its end of the connection.
var errHungUp = errors.New("its agent hung up")

// endedWait bounds how long a box that hung up before it was ready is
// given to end, so that how it ended can be told.
const endedWait = 5 * time.Second

// endedBeforeReady says how a box ended that never said it was ready,
// waiting for its end (while ctx allows, and at most endedWait) where the
// backend can tell it: an init that exits by itself there is most likely
// from another build.
func (s *Session) endedBeforeReady(ctx context.Context) error {
	const msg = "building the sandbox: the sandbox ended before it was ready"
	if s.f.Ended == nil {
		return errors.New(msg)
	}
	wait := time.NewTimer(endedWait)
	defer wait.Stop()
	select {
	case <-s.f.Exited:
	case <-wait.C:
		return errors.New(msg)
	case <-ctx.Done():
		return errors.New(msg)
	}
	how := s.f.Ended()
	if hint := s.silentExit(); hint != "" {
		return fmt.Errorf("building the sandbox: its init ended before it was ready (%s): %s", how, hint)
	}
	return fmt.Errorf("%s (its init ended: %s)", msg, how)
}

// silentExit explains the exit code of an init that ended before it was
// ready, where the backend tells it (see nsinit.SilentExit).
func (s *Session) silentExit() string {
	if s.f.ExitCode == nil {
		return ""
	}
	return nsinit.SilentExit(s.f.ExitCode())
}

// openSessionTasks opens the tasks files the agent's thread returns to
// after starting a process in a child cgroup.
func (s *Session) openSessionTasks() error {
	if s.f.Cgroup == nil {
		return nil
	}
	for _, path := range s.f.Cgroup.Placement().ThreadFiles {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening cgroup file %q: %w", path, err)
		}
		s.sessionTasks = append(s.sessionTasks, fd)
	}
	s.hierarchies = len(s.sessionTasks)
	return nil
}

// maxEventLine bounds one line from the agent; events are tiny, and the
// host never lets the sandbox side make it buffer more.
const maxEventLine = 64 << 10

// readEvents reports the first event on ready, then dispatches the rest
// until the agent hangs up, which ends the session. Every line is the
// sandbox's and may be anything: one that breaks the protocol kills the
// box, and the session ends with what was wrong (see end).
func (s *Session) readEvents(ready chan<- error) {
	s.readLines(bufio.NewReaderSize(s.f.Control, maxEventLine), ready, false)
}

// readLines reads the agent's lines from r (see readEvents); raw says r
// is a stream session's connection before any stream, where a box may
// only refuse or fail.
func (s *Session) readLines(r *bufio.Reader, ready chan<- error, raw bool) {
	// A restored agent said it was ready before its checkpoint; over the
	// stream its first event is the resumed one instead.
	first := !s.f.Restored || s.f.Stream
	var end error
	for end == nil {
		limit := maxEventLine
		if first && s.f.Restored {
			limit = s.resumedLineLimit()
		}
		line, err := readLine(r, limit)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			end = fmt.Errorf("%w: an event line longer than %d bytes", nsinit.ErrProtocol, limit)
		case err != nil:
			// A reset is an agent that exited with bytes of ours unread.
			end = streamEnd(err)
		case first && s.f.Restored && raw:
			end = fmt.Errorf("%w: it answered resumed outside the stream it was asked for", nsinit.ErrProtocol)
		case first && s.f.Restored:
			if end = s.resumedLine(line); end == nil {
				first = false
				ready <- nil
			}
		case first:
			if end = s.boot(line); end == nil && raw {
				end = fmt.Errorf("%w: it answered ready outside the stream it was asked for", nsinit.ErrProtocol)
			} else if end == nil {
				first = false
				ready <- nil
			}
		default:
			end = s.dispatchLine(line)
		}
	}
	s.finishEvents(ready, first, end)
}

// readLine reads a line of at most limit bytes from r, whose buffer
// may be shorter (a restored agent's list of processes can be longer
// than any event): past limit it fails with bufio.ErrBufferFull. The line
// is r's own unless it is longer than r's buffer.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var long []byte
	for {
		part, err := r.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		switch n := len(long) + len(part); {
		case n > limit, full && n == limit:
			return nil, bufio.ErrBufferFull
		case !full && long == nil:
			return part, err
		case !full:
			return append(long, part...), err
		}
		long = append(long, part...)
	}
}

// finishEvents ends the session with end, the reason its events stopped
// (killing a box that broke the protocol), and reports it on ready when
// the box never said it was ready (first).
func (s *Session) finishEvents(ready chan<- error, first bool, end error) {
	if errors.Is(end, nsinit.ErrProtocol) {
		s.f.Kill()
	}
	if first {
		ready <- end
	}
	s.end(end)
}

// breach ends the session for a box that broke the protocol (err matches
// nsinit.ErrProtocol): the box is killed, since nothing it says can be
// believed any more, and err is the session's final cause.
func (s *Session) breach(err error) {
	// Ended first, so that the hang-up the kill causes is not taken for
	// the cause.
	s.end(err)
	s.f.Kill()
}

// boot reads the agent's first line: nil for ready, or why not.
func (s *Session) boot(line []byte) error {
	e, err := nsinit.ParseEvent(line, true)
	switch {
	case err != nil:
		return err
	case e.Kind != nsinit.EventReady:
		return fmt.Errorf("building the sandbox: %s", e.Status.Error)
	}
	return nil
}

// dispatchLine parses and dispatches one event after ready.
func (s *Session) dispatchLine(line []byte) error {
	e, err := nsinit.ParseEvent(line, false)
	switch {
	case err != nil:
		return err
	case e.Kind == nsinit.EventQuiesced:
		return s.quiescedEvent()
	case e.Kind == nsinit.EventResumed:
		return fmt.Errorf("%w: a resumed event outside the first event of a restored stream", nsinit.ErrProtocol)
	}
	return s.dispatch(e)
}

// end marks the session over and releases every process still waiting.
// An end for a broken protocol is final: Err reports it even once the
// box's own end is known, since that end was the host's doing.
func (s *Session) end(err error) {
	e := &endedError{cause: err.Error(), final: errors.Is(err, nsinit.ErrProtocol)}
	if e.final {
		e.is = nsinit.ErrProtocol
	}
	s.endWith(e)
}

// endWith is end with its cause e, unless the session has one already.
func (s *Session) endWith(e *endedError) {
	s.mu.Lock()
	if s.err == nil {
		s.err = e
	}
	// Done closes with s.err set and before any process is settled, so
	// whoever sees an exec fail with the session's end also finds Done
	// closed (the server answers such an exec 409, not 500). end runs
	// from the event reader and from a breach the host finds itself (see
	// breach), possibly at once. The settles are counted in s.finishing
	// before Done closes: teardown waits for them after Done, and a
	// settle it missed would strand its exec cgroup after teardown took
	// the stranded ones, leaving it and the session's cgroup behind.
	procs := s.procs
	s.procs = map[uint64]*Process{}
	s.finishing.Add(len(procs))
	s.doneOnce.Do(func() { close(s.done) })
	s.mu.Unlock()
	for _, p := range procs {
		p.settle(nil, nsinit.Event{})
		s.finishing.Done()
	}
}

// The events a process reports: one started (none when it could not
// start) and one exited, which may come first, since the agent's reaper
// and the thread that started the process both write.
const (
	sawStarted uint8 = 1 << iota
	sawExited
)

// dispatch hands a valid event to its process. An event for an ID the
// host never gave out, or never sent (its request failed), or one its
// process has already reported, breaks the protocol.
func (s *Session) dispatch(e nsinit.Event) error {
	s.mu.Lock()
	err := s.record(e)
	if err == nil {
		err = s.recordOOMs(e)
	}
	p := s.procs[e.ID]
	if err == nil && e.Kind == nsinit.EventExited {
		delete(s.procs, e.ID)
		// a restored process that ended before Adopt took it
		delete(s.live, e.ID)
	}
	s.mu.Unlock()
	if err != nil || p == nil {
		return err
	}
	switch e.Kind {
	case nsinit.EventStarted:
		p.markStarted(e.Pid, e.OOMKills)
	case nsinit.EventExited:
		st := *e.Status
		s.finishing.Add(1)
		go func() {
			defer s.finishing.Done()
			p.settle(&st, e)
		}()
	}
	return nil
}

// recordOOMs keeps the highest OOM kill count the box reported (ParseEvent
// bounded it); one from a box that does not count its own breaks the
// protocol. s.mu is held.
func (s *Session) recordOOMs(e nsinit.Event) error {
	switch {
	case e.OOMKills == 0:
	case !s.f.GuestOOMs:
		return fmt.Errorf("%w: %q event for process %d reports OOM kills, which only a box that counts its own (a microVM's) may", nsinit.ErrProtocol, e.Kind, e.ID)
	default:
		s.guestOOMs = max(s.guestOOMs, e.OOMKills)
	}
	return nil
}

// record checks e against what its process has reported so far and
// records it; s.mu is held.
func (s *Session) record(e nsinit.Event) error {
	if e.ID > s.nextID {
		return fmt.Errorf("%w: event for process %d, which the host never started", nsinit.ErrProtocol, e.ID)
	}
	pend, ok := s.seen[e.ID]
	if !ok {
		return fmt.Errorf("%w: %q event for process %d, which has already ended or was never sent", nsinit.ErrProtocol, e.Kind, e.ID)
	}
	saw := pend.Events
	bit := sawStarted
	if e.Kind == nsinit.EventExited {
		bit = sawExited
	}
	switch {
	case saw&bit != 0:
		return fmt.Errorf("%w: a second %q event for process %d", nsinit.ErrProtocol, e.Kind, e.ID)
	case saw&sawStarted != 0 && e.Kind == nsinit.EventExited && e.Status.StartFailed:
		return fmt.Errorf("%w: process %d failed to start after it started", nsinit.ErrProtocol, e.ID)
	}
	saw |= bit
	if saw == sawStarted|sawExited || e.Kind == nsinit.EventExited && e.Status.StartFailed {
		delete(s.seen, e.ID)
	} else {
		pend.Events = saw
		s.seen[e.ID] = pend
	}
	return nil
}

// LastID is the last process ID the session has given out, which the
// session of a box restored from a checkpoint of this one starts above
// (Frame.PriorIDs).
func (s *Session) LastID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextID
}

// Unfinished are the processes the session told the agent of that have
// not reported all their events, with those they have reported and,
// over the stream, the directions their fds were granted: what a session
// restored from a checkpoint of this one may still receive or list
// (Frame.Prior).
func (s *Session) Unfinished() Unfinished {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := make(Unfinished, len(s.seen))
	for id, p := range s.seen {
		u[id] = Pending{Events: p.Events, Streams: append([]string(nil), p.Streams...)}
	}
	return u
}

// Running is how many processes the session started have not yet
// reported their end.
func (s *Session) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

// Done is closed when the sandbox has ended: closed, or its init died.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended, once Done is closed: ErrSessionEnded
// with one clause of cause, how its init ended where the backend can tell
// by the time Err is called ("its init ended (signal: killed)"), or else
// what the host saw ("its agent hung up"). A session that died is then
// reported with its real cause: killed, exited, its spawner gone, or the
// broken message for which the host killed it.
func (s *Session) Err() error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	var ended *endedError
	if err == nil || s.f.Ended == nil || errors.As(err, &ended) && ended.final {
		return err
	}
	select {
	case <-s.f.Exited:
	default:
		return err
	}
	if s.f.ExitCode != nil {
		if why := nsinit.EndedCause(s.f.ExitCode()); why != nil {
			return &endedError{cause: why.Error(), is: why}
		}
	}
	return &endedError{cause: "its init ended (" + s.f.Ended() + ")"}
}

// Exited is closed once the box's init has exited, after Done where
// the sandbox ended on its own; from then on Err says how it ended.
func (s *Session) Exited() <-chan struct{} { return s.f.Exited }

// endedError is why a session ended: ErrSessionEnded and a cause.
type endedError struct {
	cause string
	// final says the cause stands even once the box's end is known.
	final bool
	// is is the cause's own error where it has one (nsinit.EndedCause).
	is error
}

func (e *endedError) Error() string { return ErrSessionEnded.Error() + ": " + e.cause }

// Is makes the error match ErrSessionEnded, and its cause's own error.
func (e *endedError) Is(target error) bool {
	return target == ErrSessionEnded || e.is != nil && target == e.is
}

// Cause is the cause alone, one clause ("its init ended (signal:
// killed)"), for a dead session's reason.
func (e *endedError) Cause() string { return e.cause }

// Workspace is the sandbox's /workspace, an O_PATH descriptor opened while
// the sandbox was known alive; it stays valid until Close. Resolve nothing
// below it without a link-refusing lookup: the sandbox writes there. It
// is nil for a box whose files are not on this host (Frame.OpenWorkspace
// nil), which workspace.FromFile refuses by name.
func (s *Session) Workspace() *os.File { return s.workspace }

// FileOwner is the host uid and gid of the sandbox user, which host-side
// access to the workspace must act as.
func (s *Session) FileOwner() (uid, gid int) { return s.f.UID, s.f.GID }

// Env is the environment of a process the session starts: the base
// environment, the session's, then extra.
func (s *Session) Env(extra ...string) []string {
	s.mu.Lock()
	env := append(append([]string(nil), s.f.Spec.Env...), extra...)
	s.mu.Unlock()
	return s.f.Env(env)
}

// Usage is what the session's cgroup has counted so far: the CPU time of
// every process that ran in it (v1 and v2 count child cgroups in their
// parent), and how many processes the OOM killer ended, in the session's
// cgroup and in its execs' (counted where the victim was, even after the
// exec's cgroup was removed). Zero without a cgroup. A GuestOOMs session
// has no host cgroup: its CPU time is 0 and its kills the highest count
// its box reported.
func (s *Session) Usage() (cpu time.Duration, ooms uint64) {
	if s.f.GuestOOMs {
		s.mu.Lock()
		defer s.mu.Unlock()
		return 0, s.guestOOMs
	}
	if s.f.Cgroup == nil {
		return 0, 0
	}
	if st, err := s.f.Cgroup.Stats(); err == nil {
		cpu, ooms = st.CPUTime, st.OOMKills
	}
	s.mu.Lock()
	ooms += s.settledOOMs
	live := make([]*Process, 0, len(s.procs))
	for _, p := range s.procs {
		live = append(live, p)
	}
	s.mu.Unlock()
	for _, p := range live {
		if p.cg == nil {
			continue
		}
		if st, err := p.cg.Stats(); err == nil {
			ooms += st.OOMKills
		}
	}
	return cpu, ooms
}

// Close kills everything in the sandbox and removes every trace of it on
// the host: cgroups, the id lease, descriptors.
func (s *Session) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		<-s.done
		return nil
	}
	return s.teardown()
}

func (s *Session) teardown() error {
	var thawErr error
	if err := s.resumeToEnd(); err != nil {
		thawErr = fmt.Errorf("resuming the paused box to end it: %w", err)
	}
	s.f.Kill()
	<-s.f.Exited
	s.closeControl()
	<-s.done
	s.finishing.Wait()
	if s.workspace != nil {
		s.workspace.Close()
		s.workspace = nil
	}
	err := errors.Join(thawErr, s.takeNoted(), s.removeCgroups())
	s.f.Cleanup()
	return err
}

// removeCgroups removes the stranded exec cgroups, then the session's
// cgroup, once the init has exited: every process of its PID namespace
// died with it, so they are empty (or their last tasks are exiting, which
// the removal waits out), and removing them needs no descriptor, unlike
// the kill, a mere backstop here. What still cannot be removed is left to
// the sweeper rather than forgotten.
func (s *Session) removeCgroups() error {
	cgs := s.takeStranded()
	var kerr error
	if s.f.Cgroup != nil {
		kerr = s.f.Cgroup.Kill()
		cgs = append(cgs, s.f.Cgroup)
	}
	left, err := removeInOrder(cgs)
	if err == nil {
		return nil
	}
	leftovers.add(left...)
	return fmt.Errorf("removing the session's cgroups: %w (%d left to retry in the background)", errors.Join(kerr, err), len(left))
}

// closeControl closes the control socket and the session's tasks files,
// after which send fails instead of writing to a reused number.
func (s *Session) closeControl() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.ctlClosed = true
	if s.mux != nil {
		// Closing the stream closes its connection, f.Control.
		if err := s.mux.Close(); err != nil {
			s.log().Warn("closing the control stream", "err", err)
		}
		s.f.Control = nil
	}
	if s.f.Control != nil {
		s.f.Control.Close()
		s.f.Control = nil
	}
	closeFDs(s.sessionTasks)
	s.sessionTasks = nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// execCgroup makes the child cgroup a process starts in, or nil where
// there is none to make (v2, or no cgroup at all).
func (s *Session) execCgroup(id uint64) (cgroup.Cgroup, []int, error) {
	if s.f.Cgroup == nil || s.hierarchies == 0 {
		return nil, nil, nil
	}
	cg, err := s.f.Cgroup.Child("e" + strconv.FormatUint(id, 10))
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	for _, path := range cg.Placement().ThreadFiles {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeFDs(fds)
			s.deleteExecCgroup(cg)
			return nil, nil, fmt.Errorf("opening cgroup file %q: %w", path, err)
		}
		fds = append(fds, fd)
	}
	if len(fds) != s.hierarchies {
		closeFDs(fds)
		s.deleteExecCgroup(cg)
		return nil, nil, fmt.Errorf("exec cgroup has %d hierarchies, the session %d", len(fds), s.hierarchies)
	}
	return cg, fds, nil
}

// send writes one request with its descriptors in a single sendmsg, so the
// descriptors arrive with the frame's first bytes; withSessionTasks adds
// the session cgroup's tasks files after them. A box that does not take
// the request within sendTimeout breaks the protocol.
func (s *Session) send(req nsinit.Request, fds []int, withSessionTasks bool) error {
	var err error
	if s.f.Stream {
		err = s.sendStream(req, nil, nil)
	} else {
		err = s.sendEncoded(req, fds, withSessionTasks)
	}
	return s.sendFailed(err)
}

// sendEncoded encodes req and sends it with fds (see send).
func (s *Session) sendEncoded(req nsinit.Request, fds []int, withSessionTasks bool) error {
	frame, err := nsinit.EncodeRequest(req)
	if err != nil {
		return err
	}
	return s.sendFrame(frame, fds, withSessionTasks)
}

// sendFailed is err, a failed send, after ending the session for a box
// that took no request within sendTimeout.
func (s *Session) sendFailed(err error) error {
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w: did not read a request within %d s", nsinit.ErrProtocol, sendTimeout/time.Second)
		s.breach(err)
	}
	return err
}

func (s *Session) sendFrame(frame []byte, fds []int, withSessionTasks bool) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.ctlClosed {
		return ErrSessionEnded
	}
	if withSessionTasks {
		fds = append(fds, s.sessionTasks...)
	}
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	n, err := sendmsg(s.ctl, frame, rights)
	if err != nil {
		return fmt.Errorf("sending to the sandbox: %w", err)
	}
	for rest := frame[n:]; len(rest) > 0; {
		m, err := unix.Write(s.ctl, rest)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sending to the sandbox: %w", err)
		}
		rest = rest[m:]
	}
	return nil
}

func sendmsg(fd int, p, rights []byte) (int, error) {
	for {
		n, err := unix.SendmsgN(fd, p, rights, nil, unix.MSG_NOSIGNAL)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// Cgroup is the box's cgroup as its backend made it, or nil when the host
// manages none it can divide.
func (s *Session) Cgroup() cgroup.Cgroup { return s.f.Cgroup }

// deleteExecCgroup removes an exec's cgroup that was never used, logging
// a failure: the exec fails with its own error either way.
func (s *Session) deleteExecCgroup(cg cgroup.Cgroup) {
	if err := cg.Delete(); err != nil {
		s.log().Warn("removing an unused exec cgroup", "cgroup", cg.Path(), "err", err)
	}
}
