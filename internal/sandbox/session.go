package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// session is one session's state; mu guards everything that changes.
type session struct {
	id, owner string
	box       Box
	spec      spec.Spec
	files     workspace.Limits
	store     Store

	mu       sync.Mutex
	state    State
	created  time.Time
	lastUsed time.Time
	expires  time.Time
	idle     time.Duration
	execs    int64
	interps  map[string]interp.Interpreter
	// interpProcs keep the process IDs of interps where the box numbers
	// its processes (see idSpawner), for a memory snapshot.
	interpProcs map[string]*idSpawner
	dir         workspace.Files
	// ws names the session's persistent workspace in the Store ("" when
	// /workspace lives in the sandbox).
	ws string
	// slot says the session holds one of the Manager's run slots, and
	// pausedSlot one of its paused ones; a dead one gives them back.
	slot, pausedSlot bool
	// autoPause pauses the session at its idle timeout instead of ending
	// it; pausedAt is when a paused one was paused.
	autoPause bool
	pausedAt  time.Time
	// copyPause is the pause a paused session is in when a snapshot's or
	// a fork's copy paused it (nil: its user did), so that the copy's end
	// resumes only a session its user has not paused meanwhile.
	copyPause *copyPause
	// snap names a snapshotted session's snapshot (see Manager.Snapshot),
	// snapAt is when it was taken and snapStats what it holds; snapSlot
	// says the session holds one of the Manager's snapshot slots.
	// boxClosed says box is closed already (snapshotted, or revived
	// snapshotted with a deadBox), so the session's end closes nothing.
	snap      string
	snapAt    time.Time
	snapStats snapshot.Stats
	snapSlot  bool
	boxClosed bool
	// snapMemory is the size of the box's memory saved beside the
	// snapshot (0: files only), and snapInterps the interpreters a
	// resume adopts from it (see Manager.saveMemory).
	snapMemory  int64
	snapInterps []state.Interpreter
	// forkHeld says the session is snapshotted for a fork that resumes
	// it once its copies are made (SnapshotOptions.keepRun): a Pause or
	// Snapshot meanwhile is refused, which that resume would undo.
	forkHeld bool
	// saving is open while the box is being saved whole for a memory
	// snapshot: its end then is the save's, not a death.
	saving chan struct{}
	// staleSnap names a snapshot the session resumed from whose record
	// could not be updated, so it still names it: kept for a crash to
	// recover from, and dropped with the session (see forget).
	staleSnap string
	// autoSnapshot snapshots the session at its idle timeout (before
	// autoPause is considered).
	autoSnapshot bool
	// firstExecEnded, if set, is called after each exec and at the
	// session's end: a box taken from a warmed pool refills the pool once
	// its first exec has ended, or the session did (pool.take's refill,
	// which runs once).
	firstExecEnded func()
	// copying says the session's files are being copied into a snapshot
	// (or a fork's), and for a snapshot until it is recorded: file calls
	// are refused meanwhile, as a change then would be lost (see beginCopy).
	copying bool
	// stopCopy cancels the copy into or out of a snapshot under way, if
	// any, once the session begins to end (see stopOnEnd).
	stopCopy context.CancelFunc
	// pauseMu serialises pausing, resuming and snapshotting the
	// session's box, and replacing it (a resume from a snapshot).
	pauseMu sync.Mutex
	// starting counts spawns between their state check and their box's
	// answer: a pause then would freeze the start, leaving its caller
	// waiting on a box that cannot answer, so a pause is refused.
	starting int
	// diedAt and reason say when and why a dead session died.
	diedAt time.Time
	reason string
	// gone is closed once close has finished.
	gone chan struct{}
	// pace paces exec starts (see execPacer); nil paces nothing.
	pace *execPacer
	// lease holds the session's template (spec.Root) in the store while
	// the session's box lives; releaseTemplate gives it back once.
	lease     func()
	leaseOnce sync.Once
}

// releaseTemplate gives back the lease on the session's template, once
// its box is closed: the store may then remove the template.
func (s *session) releaseTemplate() {
	s.leaseOnce.Do(func() {
		if s.lease != nil {
			s.lease()
		}
	})
}

func (s *session) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := Info{
		ID: s.id, State: s.state, CreatedAt: s.created, LastUsedAt: s.lastUsed, ExpiresAt: s.expires,
		IdleTimeout: s.idle, Limits: s.spec.Limits, Network: s.spec.Network, Execs: s.execs, Reason: s.reason,
		Template: s.spec.Root.Template, AutoPause: s.autoPause, PausedAt: s.pausedAt,
		AutoSnapshot: s.autoSnapshot, CopyPaused: s.copyPausedLocked(),
	}
	if s.state == StateSnapshotted {
		in.Snapshot = &SnapshotInfo{At: s.snapAt, Memory: s.snapMemory > 0, Bytes: s.snapStats.Bytes, Files: s.snapStats.Files, Skipped: s.snapStats.Skipped}
	}
	if s.boxDiedLocked() {
		in.State, in.Reason, in.CopyPaused = StateDead, deathCause(s.box), false
	}
	return in
}

// boxDiedLocked says s's sandbox ended while s was live, and s is not
// buried yet: the Manager buries it as soon as it sees the box end
// (watchBox), and until it has, s answers as a dead session already.
// s.mu is held.
func (s *session) boxDiedLocked() bool {
	if s.state != StateReady && s.state != StateBusy && s.state != StatePaused || s.saving != nil {
		return false
	}
	select {
	case <-s.box.Done():
		return true
	default:
		return false
	}
}

func (s *session) currentState() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// begin moves ready → busy, or says why the session cannot take an exec.
func (s *session) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.deadLocked(); err != nil {
		return err
	}
	switch s.state {
	case StateReady:
		s.state = StateBusy
		return nil
	case StateBusy:
		return fmt.Errorf("%w: session %s is running another exec; wait for it to finish", ErrBusy, s.id)
	case StatePaused:
		return fmt.Errorf("%w: session %s was paused again before the exec began; resume it and retry", ErrBusy, s.id)
	case StateSnapshotted:
		return fmt.Errorf("%w: session %s was snapshotted again before the exec began; retry (the exec resumes it)", ErrBusy, s.id)
	}
	return fmt.Errorf("%w: session %s is %s", ErrClosed, s.id, s.state)
}

// finish moves busy → ready after an exec, unless the session began
// stopping meanwhile, and counts the exec.
func (s *session) finish() {
	s.abandon()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = time.Now()
	s.execs++
}

// abandon moves busy → ready, unless the session began stopping
// meanwhile, for an exec that never started.
func (s *session) abandon() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateBusy {
		s.state = StateReady
	}
}

// stopping moves the session to stopping; false if it already was.
func (s *session) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateStopping || s.state == StateGone {
		return false
	}
	s.state = StateStopping
	if s.stopCopy != nil {
		s.stopCopy()
	}
	return true
}

// stopOnEnd is ctx, cancelled too once s begins to end, so a Delete or
// the TTL stops a copy of its files; release it once the copy is done.
func (s *session) stopOnEnd(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.stopCopy = cancel
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		s.stopCopy = nil
		s.mu.Unlock()
		cancel()
	}
}

// close kills the interpreters and the box and marks the session gone.
func (s *session) close() error {
	s.mu.Lock()
	interps, dir := s.interps, s.dir
	s.interps, s.interpProcs, s.dir = nil, nil, nil
	// A box paused for a copy holds no paused slot but is frozen all
	// the same (see pauseForCopy).
	paused, closed := s.pausedSlot || !s.pausedAt.IsZero(), s.boxClosed
	s.boxClosed = true
	s.mu.Unlock()
	var err error
	if !closed {
		err = s.closeBox(paused, interps, dir)
	}
	s.mu.Lock()
	s.state = StateGone
	s.mu.Unlock()
	close(s.gone)
	return err
}

// closeBox closes the box and what the session held open on it. A
// paused box is closed first: its interpreters could not end while it
// is frozen, and each would wait out its exit grace (5 s) before the box
// ended them all at once. A running one's interpreters go first, so each
// is ended as it asks.
func (s *session) closeBox(paused bool, interps map[string]interp.Interpreter, dir workspace.Files) error {
	if paused {
		boxErr := s.box.Close()
		return errors.Join(boxErr, closeHeld(interps, dir))
	}
	heldErr := closeHeld(interps, dir)
	return errors.Join(heldErr, s.box.Close())
}

// closeHeld closes what a session held open on its sandbox (its
// interpreters, its workspace descriptor), all of it whatever fails,
// joining the failures for the caller to log.
func closeHeld(interps map[string]interp.Interpreter, dir workspace.Files) error {
	var errs []error
	for lang, in := range interps {
		if err := in.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the %s interpreter: %w", lang, err))
		}
	}
	if dir != nil {
		if err := dir.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the workspace: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ifDead is ErrDead, saying why, when s is dead or its sandbox has just
// ended (not buried yet), else nil.
func (s *session) ifDead() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadLocked()
}

// deadLocked is the DeadError of s when its box has died or it is dead,
// else nil; s.mu is held.
func (s *session) deadLocked() error {
	switch {
	case s.boxDiedLocked():
		return deadError(s.id, time.Now(), deathCause(s.box), s.ws != "")
	case s.state == StateDead:
		return s.deadError()
	}
	return nil
}

// deadError says that s is dead, why, and what can still be done.
func (s *session) deadError() error {
	return deadError(s.id, s.diedAt, s.reason, s.ws != "")
}

// deadError says that session id died at a time, why, and what can
// still be done: read its files if they are kept, delete it.
func deadError(id string, at time.Time, reason string, kept bool) error {
	return &DeadError{ID: id, At: at, Reason: reason, FilesKept: kept}
}

func (s *session) exec(ctx context.Context, req ExecRequest, live Stream) (spec.Result, error) {
	if err := validateExec(req); err != nil {
		return spec.Result{}, err
	}
	if err := s.begin(); err != nil {
		return spec.Result{}, err
	}
	queued, err := s.pace.wait(ctx, execCost(req))
	if err != nil {
		s.abandon()
		return spec.Result{}, err
	}
	defer s.finish()
	seen := len(s.box.NetworkEvents())
	r, err := s.run(ctx, req, live)
	if s.firstExecEnded != nil {
		s.firstExecEnded()
	}
	s.pace.charge(outputCost(r, live.Stdout != nil || live.Stderr != nil))
	r.QueuedMS = ms(queued)
	if events := s.box.NetworkEvents(); len(events) > seen {
		r.Network = events[seen:]
	}
	if s.ended() {
		return spec.Result{}, s.endedError()
	}
	return r, err
}

// endedError says that s ended during an exec, and why: deleted or
// expired (ErrClosed), or its sandbox died, with the cause (ErrDead: the
// session stays, dead, until deleted).
func (s *session) endedError() error {
	if st := s.currentState(); st == StateStopping || st == StateGone {
		return fmt.Errorf("%w: session %s ended during the exec (deleted or expired)", ErrClosed, s.id)
	}
	return &DeadError{ID: s.id, Reason: deathCause(s.box), FilesKept: s.ws != ""}
}

func (s *session) run(ctx context.Context, req ExecRequest, live Stream) (spec.Result, error) {
	timeout := req.Timeout
	if timeout == 0 {
		timeout = s.spec.Limits.Timeout
	}
	if req.Language == "" {
		return s.box.Exec(ctx, Command{Argv: req.Command, Env: req.Env, Dir: req.Cwd, Stdin: readerOrNil(req.Stdin), Timeout: timeout}, live)
	}
	in, err := s.interpreter(req.Language, req.Interpreter)
	if err != nil {
		return spec.Result{}, err
	}
	return s.runCode(ctx, in, req.Code, timeout, live)
}

// ended says whether the session began stopping or its sandbox is gone.
func (s *session) ended() bool {
	select {
	case <-s.box.Done():
		return true
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == StateStopping || s.state == StateGone
}

// runCode runs code in a persistent interpreter and reports it as a Result.
func (s *session) runCode(ctx context.Context, in interp.Interpreter, code string, timeout time.Duration, live Stream) (spec.Result, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	limit := s.spec.Limits.OutputBytes
	out := &limited{max: limit, live: live.Stdout}
	errOut := &limited{max: limit, live: live.Stderr}
	cpu, ooms := s.box.Usage()
	begin := time.Now()
	o, err := in.Run(ctx, code, out, errOut)
	wall := time.Since(begin)
	if o.Started {
		s.pace.charge(interpStartCost)
	}
	cpuAfter, oomsAfter := s.box.Usage()
	r := spec.Result{
		ExitCode: o.ExitCode, Signal: spec.SignalName(o.Signal), TimedOut: o.TimedOut,
		OOMKilled: oomsAfter > ooms, WallTimeMS: ms(wall), CPUTimeMS: ms(cpuAfter - cpu),
		Stdout: out.String(), Stderr: errOut.String(), StdoutTruncated: out.truncated, StderrTruncated: errOut.truncated,
		Value: o.Value, Exception: o.Exception, Outputs: o.Outputs, InterpreterRestarted: o.Restarted,
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r, err
}

// interpreter returns the session's interpreter for language called name
// ("" for the default one), made on first use; its process starts on its
// first run.
func (s *session) interpreter(language, name string) (interp.Interpreter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := interpKey(language, name)
	if in, ok := s.interps[key]; ok {
		return in, nil
	}
	if err := s.roomForInterpreter(name); err != nil {
		return nil, err
	}
	if err := checkLanguage(s.spec.Root, language); err != nil {
		return nil, err
	}
	in, err := interp.New(language, s.spawnerFor(language, name), s.box.Env(), interpOptions(s.spec)...)
	if err != nil {
		delete(s.interpProcs, key)
	}
	switch {
	case errors.Is(err, interp.ErrUnknownLanguage):
		return nil, fmt.Errorf("%w: %w", spec.ErrInvalid, err)
	case errors.Is(err, errors.ErrUnsupported):
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	case err != nil:
		return nil, err
	}
	if s.interps == nil {
		s.interps = map[string]interp.Interpreter{}
	}
	s.interps[key] = in
	return in, nil
}

// workspace opens the session's /workspace once, and marks a live session
// used: file access counts as activity for the idle timeout (a dead one's
// life is not prolonged by reading it).
func (s *session) workspace() (workspace.Files, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateStopping || s.state == StateGone {
		return nil, fmt.Errorf("%w: session %s is %s", ErrClosed, s.id, s.state)
	}
	if s.copying {
		return nil, fmt.Errorf("%w: session %s is being snapshotted; retry once that ends", ErrBusy, s.id)
	}
	if s.state == StateSnapshotted {
		// Snapshotted between the caller's resume and here: its box is
		// closed, so a workspace opened now would be thrown away.
		return nil, fmt.Errorf("%w: session %s was snapshotted meanwhile; retry", ErrBusy, s.id)
	}
	if s.state != StateDead {
		s.lastUsed = time.Now()
	}
	if s.dir != nil {
		return s.dir, nil
	}
	if s.state == StateDead {
		return s.deadWorkspace()
	}
	dir, err := s.liveFiles()
	if err != nil {
		return nil, fmt.Errorf("opening the session's workspace: %w", err)
	}
	s.dir = dir
	return dir, nil
}

// liveFiles are a live box's files: through its agent when it serves
// them (RemoteFiler), else through its Workspace descriptor; s.mu is
// held.
func (s *session) liveFiles() (workspace.Files, error) {
	lim := s.fileLimits()
	if rf, ok := s.box.(RemoteFiler); ok {
		files, err := rf.RemoteFiles(lim)
		if !errors.Is(err, errors.ErrUnsupported) {
			return files, err
		}
	}
	uid, gid := s.box.FileOwner()
	return workspace.FromFile(s.box.Workspace(), "/workspace of "+s.id, uid, gid, lim)
}

// remoteFiles says s's box serves its files through its agent, which
// must be running to answer.
func (s *session) remoteFiles() bool {
	rf, ok := s.currentBox().(RemoteFiler)
	if !ok {
		return false
	}
	// Only whether it serves them matters: no limits are needed to ask.
	files, err := rf.RemoteFiles(workspace.Limits{})
	if err != nil {
		return false
	}
	// a remote client holds nothing until its first call
	_ = files.Close()
	return true
}

// deadWorkspace opens a dead session's workspace where the Store keeps
// it, read-only (see Store.SealWorkspace); s.mu is held.
func (s *session) deadWorkspace() (workspace.Files, error) {
	if s.ws == "" || s.store == nil {
		return nil, s.deadError()
	}
	uid, gid := s.box.FileOwner()
	lim := s.fileLimits()
	lim.ReadOnly = true
	f, err := s.store.OpenFiles(s.ws)
	if err != nil {
		return nil, fmt.Errorf("opening the dead session's workspace: %w", err)
	}
	defer f.Close()
	dir, err := workspace.FromFile(f, "/workspace of "+s.id, uid, gid, lim)
	if err != nil {
		return nil, fmt.Errorf("opening the dead session's workspace: %w", err)
	}
	s.dir = dir
	return dir, nil
}

// fileLimits are the Manager's file limits, with an upload held to the
// session's own largest-file limit, which its code would meet too.
func (s *session) fileLimits() workspace.Limits {
	lim := s.files
	most := lim.MaxFileBytes
	if most == 0 {
		most = workspace.DefaultMaxFileBytes
	}
	if fs := s.spec.Limits.FileSizeBytes; fs > 0 && fs < most {
		lim.MaxFileBytes = fs
	}
	return lim
}

// validateExec checks that a request is a command or code, not both.
func validateExec(req ExecRequest) error {
	switch {
	case len(req.Command) > 0 && (req.Language != "" || req.Code != ""):
		return fmt.Errorf("%w: give either command or language and code, not both", spec.ErrInvalid)
	case len(req.Command) > 0:
		if req.Command[0] == "" {
			return fmt.Errorf("%w: command[0] is empty: name the program to run", spec.ErrInvalid)
		}
	case req.Language == "":
		return fmt.Errorf("%w: nothing to run: give command, or language and code", spec.ErrInvalid)
	case !interp.Known(req.Language):
		return UnknownLanguage(req.Language)
	case len(req.Stdin) > 0 || len(req.Env) > 0 || req.Cwd != "":
		return fmt.Errorf("%w: stdin, env and cwd apply to commands; an interpreter keeps the session's environment (change directory or variables in the code itself)", spec.ErrInvalid)
	}
	if err := validInterpreterName(req.Interpreter); err != nil {
		return err
	}
	if req.Interpreter != "" && req.Language == "" {
		return fmt.Errorf("%w: interpreter %q names an interpreter of a language: give language and code", spec.ErrInvalid, req.Interpreter)
	}
	if req.Timeout < 0 {
		return fmt.Errorf("%w: timeout %v is negative", spec.ErrInvalid, req.Timeout)
	}
	return spec.ValidateEnv(req.Env)
}
