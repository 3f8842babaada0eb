package gvisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/cgroup"
)

// A box on runsc's ptrace platform pauses through the freezer of the
// cgroup runsc made for it (cgroupsPath), where runsc puts both its
// sandbox and its gofer: a freeze and a thaw take a few milliseconds. A
// box on any other platform (freezablePlatform), or without such a
// cgroup, or whose freeze does not settle in time, pauses by asking its
// sentry over its control socket (sentryPause, control_linux.go), as
// runsc pause would, in 1-3 ms where `runsc pause` and `runsc resume`, a
// Go program started each time, take 20-70 ms; where the socket is not
// there (another runsc) or the sentry refuses the call, with runsc pause,
// as it always did. Neither leaves a trace in runsc's state, which says
// running. A frozen sentry answers no runsc command, so whatever runs
// runsc on a paused box first leaves the freeze: a checkpoint turns it,
// and a sentry's pause, into a runsc pause (stillForSave); a kill needs
// no runsc, and kills the paused processes before it thaws them
// (endPause).
type pauser struct {
	// mu serialises pause, resume and stillForSave; kill never takes
	// it, so a kill never waits behind a runsc command (endPause).
	mu sync.Mutex
	// frozen says the freezer may hold the box; runscPaused that runsc
	// may have paused it; saved that runsc saved it (a runsc of 2026
	// leaves the saved sandbox paused, not ended). frozen is set before
	// a freeze, so a failed one is undone too; runscPaused only once
	// runsc paused the box, or runsc's state says it may be paused
	// (runscPause). Each is cleared by the undo that worked. They are
	// atomic because kill reads them without mu; fz is written before
	// frozen is first set, so a kill that sees frozen sees fz. pausing
	// is set while a runsc or a sentry's pause runs, before runscPaused
	// or sentryPaused can say how it went: a kill meanwhile treats the
	// box as paused (endPause).
	//
	// sentryPaused says the sentry may hold a pause it was asked for
	// over its control socket: set once the request was sent, cleared
	// only by a resume the sentry confirmed.
	frozen, runscPaused, sentryPaused, saved, pausing atomic.Bool
	// inDoubt says a pause or a resume was sent to the sentry and not
	// answered: whether the sentry did it is unknown, and it panics on a
	// resume it was not paused for. Such a box is never resumed (resume
	// fails with agent.ErrStateUnknown), only ended (endPause).
	inDoubt bool
	// badPeer, once set, is why the box never pauses, every pause's
	// error: its control socket's listener is not its sentry (it wraps
	// errBadPeer and agent.ErrCannotPause).
	badPeer error
	// call, when set (tests only), replaces the call to the box's sentry
	// (callSentry) for every method.
	call func(ctx context.Context, method string) error
	// sock, when set (tests only), is the box's control socket in place
	// of controlSocket(id).
	sock string
	// fz is the box's freezer, opened at its first pause, unless
	// noFreezer says it has none.
	fz        cgroup.Freezer
	noFreezer bool
	// noControl says the box's sentry cannot be asked over a control
	// socket (none where the pinned runsc makes it, a sentry that does
	// not know the call, a runsc that speaks another format): it pauses
	// with runsc pause.
	noControl bool
	// viaRunsc makes pauses use runsc pause, which a checkpoint's save
	// needs (pauseWithRunsc), while it is set.
	viaRunsc bool
}

// freezeTimeout bounds a freeze of the box before it pauses through its
// sentry instead: far above a freeze's p99 measured at load 20 (49 ms),
// far below agent.FreezeTimeout, since the fallback works where the
// freezer cannot. Under runsc's ptrace platform a freeze can stall for
// good: one traced stub stays in ptrace_stop (state t), never counted
// frozen, likely left so by a sentry thread frozen in the middle of a
// ptrace request (1 to 6 of 100 pauses of a box forking hard, and now
// and then of a spinning one).
const freezeTimeout = 250 * time.Millisecond

// pause stops every process of the box (Frame.Pause).
func (b *box) pause(ctx context.Context) error {
	b.pz.mu.Lock()
	defer b.pz.mu.Unlock()
	if b.pz.badPeer != nil {
		return b.pz.badPeer
	}
	if err := b.doubtLocked(); err != nil {
		return err
	}
	if b.pz.viaRunsc {
		_, err := b.runscPause(ctx)
		return err
	}
	if b.freezerLocked() != nil {
		err := b.freezeLocked()
		if err == nil || b.pz.frozen.Load() {
			return err
		}
		b.logger().Warn("the box's cgroup did not freeze; pausing it through its sentry instead", "err", err)
	}
	if done, err := b.sentryPause(ctx); done {
		return err
	}
	_, err := b.runscPause(ctx)
	return err
}

// doubtLocked is an agent.ErrStateUnknown while the box's sentry may or
// may not have done what it was last asked (pauser.inDoubt): the box is
// neither paused nor resumed again, only ended.
func (b *box) doubtLocked() error {
	if b.pz.inDoubt {
		return fmt.Errorf("%w: the box's sentry did not answer its last pause or resume, so it is never asked again; end the session", agent.ErrStateUnknown)
	}
	return nil
}

// sentryPause asks the box's sentry to pause (askSentry); done is false
// when the call did not happen, and the box is to pause with runsc pause,
// which it then may only once its socket's listener was looked at
// (beforeRunscPause). A socket whose listener is not the sentry is a
// failure of its own, with no fallback (errBadPeer).
func (b *box) sentryPause(ctx context.Context) (done bool, err error) {
	if done, err := b.askSentry(ctx); done {
		return true, err
	}
	return b.beforeRunscPause(ctx)
}

// askSentry asks the box's sentry to pause (callSentry) if its runsc
// speaks the pinned urpc (Runtime.speaksControl); done is false when the
// call did not happen. A call that may have happened (sent, then no good
// reply in time) counts as a pause in doubt: resume refuses it, and the
// session ends the box (agent.ErrStateUnknown).
func (b *box) askSentry(ctx context.Context) (done bool, err error) {
	if b.pz.noControl {
		return false, nil
	}
	b.pz.pausing.Store(true)
	defer b.pz.pausing.Store(false)
	if ok, err := b.r.speaksControl(ctx, b); err != nil || !ok {
		return b.noSentryPause(err)
	}
	err = b.callSentry(ctx, sentryPause)
	switch {
	case err == nil:
		b.pz.sentryPaused.Store(true)
		return true, nil
	case errors.Is(err, errBadPeer), errors.Is(err, os.ErrNotExist):
		return b.noSentryPause(err)
	case errors.Is(err, errRefused):
		b.pz.noControl = true
		b.logger().Warn("the box's sentry refused a pause; it pauses with runsc pause", "err", err)
		return false, nil
	case errors.Is(err, errNotSent):
		b.logger().Warn("the box's sentry could not be asked to pause; pausing it with runsc pause", "err", err)
		return false, nil
	}
	b.pz.sentryPaused.Store(true)
	b.pz.inDoubt = true
	return true, fmt.Errorf("%w: pausing the box through its sentry: %w", agent.ErrStateUnknown, err)
}

// beforeRunscPause makes sure a runsc pause sentryPause chose (a binary
// not known to speak the pinned urpc: its probe under way in another
// box, another format, a probe's "no" for probeRetry; a box with no
// control or whose call was not sent) does not reach a listener that is
// not the box's sentry, as runsc pause asks the same socket without
// looking: it connects and checks the listener (dialSentry), sending
// nothing. A socket not there, or with no listener (ECONNREFUSED), goes
// on to runsc pause, which reaches no one there either; a listener that
// is not the sentry fails as noSentryPause does, with no runsc pause. A
// look that could not be made (a listener whose queue is full, a
// timeout) fails this pause, which did nothing (a retry may look again):
// runsc pause would then reach a listener no one checked.
func (b *box) beforeRunscPause(ctx context.Context) (done bool, err error) {
	if b.cmd == nil || b.cmd.Process == nil {
		// No runsc, so no sentry and no socket of its own to look at:
		// runsc pause answers for itself.
		return false, nil
	}
	err = b.lookAtListener(ctx)
	switch {
	case err == nil, errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return false, nil
	case errors.Is(err, errBadPeer):
		return b.noSentryPause(err)
	}
	b.logger().Warn("the box's control socket could not be looked at; the pause fails, to be retried", "err", err)
	return true, fmt.Errorf("pausing the box: its control socket's listener could not be checked: %w", err)
}

// lookAtListener connects to the box's control socket and checks its
// listener (dialSentry), within ctx and agent.RuntimeWait, sending
// nothing.
func (b *box) lookAtListener(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, agent.RuntimeWait)
	defer cancel()
	conn, err := dialSentry(ctx, b.logger(), b.socket(), b.cmd.Process.Pid)
	if err != nil {
		return err
	}
	closeLogged(b.logger(), conn)
	return nil
}

// socket is the box's control socket (controlSocket, or pauser.sock).
func (b *box) socket() string {
	if b.pz.sock != "" {
		return b.pz.sock
	}
	return controlSocket(b.id)
}

// noSentryPause is sentryPause's answer when the box is not to be asked:
// a listener that is not its sentry (err wraps errBadPeer) fails this
// pause and every later one (badPeer) as agent.ErrCannotPause, so the
// session layer takes the box for one that cannot pause (the user is
// answered so, and auto-pause ends the idle session rather than retry
// each round while it holds its run slot); otherwise the box pauses with
// runsc pause, now and from now on where its socket is not there.
func (b *box) noSentryPause(err error) (done bool, _ error) {
	if errors.Is(err, errBadPeer) {
		b.pz.badPeer = fmt.Errorf("%w: %w", agent.ErrCannotPause, err)
		return true, b.pz.badPeer
	}
	if errors.Is(err, os.ErrNotExist) {
		b.pz.noControl = true
		b.logger().Debug("the box has no control socket where the pinned runsc makes it; it pauses with runsc pause", "err", err)
	}
	return false, nil
}

// sentryResume undoes a sentry's pause; the pause stays recorded unless
// the sentry confirmed the resume, and one that may have happened (sent,
// then no good reply) leaves the box in doubt, never to be resumed again.
func (b *box) sentryResume(ctx context.Context) error {
	if err := b.callSentry(ctx, sentryResume); err != nil {
		if !errors.Is(err, errNotSent) {
			b.pz.inDoubt = true
		}
		return fmt.Errorf("resuming the box through its sentry: %w", err)
	}
	b.pz.sentryPaused.Store(false)
	return nil
}

// callSentry calls method on the box's sentry, over its control socket
// (callSentry), or through pauser.call in tests.
func (b *box) callSentry(ctx context.Context, method string) error {
	if b.pz.call != nil {
		return b.pz.call(ctx, method)
	}
	if b.cmd == nil || b.cmd.Process == nil {
		return fmt.Errorf("%w: the box's runsc has not started", errNotSent)
	}
	return callSentry(ctx, b.logger(), b.socket(), b.cmd.Process.Pid, method)
}

// freezeLocked freezes the box within freezeTimeout. Freeze thawed the
// cgroup when it failed; a thaw that fails too leaves frozen set and
// stops any fallback, since the other pauses need the sentry running.
func (b *box) freezeLocked() error {
	b.pz.frozen.Store(true)
	err := b.pz.fz.Freeze(freezeTimeout)
	if err == nil {
		return nil
	}
	if terr := b.pz.fz.Thaw(); terr != nil {
		return fmt.Errorf("freezing the box: %w; thawing it again: %w", err, terr)
	}
	b.pz.frozen.Store(false)
	return fmt.Errorf("freezing the box: %w", err)
}

// runscPause pauses the box with runsc pause; sure says runsc paused it:
// its pause worked, or failed but its state says paused. A pause that
// failed may have paused the box (runsc timed out after its pause) or
// not, so runsc's state says which, and one that cannot be read counts
// as paused (runscPaused, not sure): a resume then finds out, where a box
// taken for running while runsc paused it would stay so for good.
func (b *box) runscPause(ctx context.Context) (sure bool, err error) {
	b.pz.pausing.Store(true)
	defer b.pz.pausing.Store(false)
	err = b.runscCtx(ctx, "pause", b.id)
	if err == nil {
		b.pz.runscPaused.Store(true)
		return true, nil
	}
	status, serr := b.stateNow()
	b.pz.runscPaused.Store(serr != nil || status == "paused")
	return status == "paused", err
}

// mayBePaused says runsc's state of the box is paused, or cannot be
// read within killTimeout.
func (b *box) mayBePaused() bool {
	status, err := b.stateNow()
	return err != nil || status == "paused"
}

// stateNow is runsc's state of the box, read within killTimeout.
func (b *box) stateNow() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	return b.status(ctx)
}

// resume lets the box run again (Frame.Resume): it thaws a frozen box,
// resumes one runsc paused, then has the sentry undo its own pause (a
// box stillForSave left paused both ways counts two pauses); a box that
// is none of these is left alone.
func (b *box) resume(ctx context.Context) error {
	b.pz.mu.Lock()
	defer b.pz.mu.Unlock()
	if err := b.doubtLocked(); err != nil {
		return err
	}
	if b.pz.frozen.Load() {
		if err := b.pz.fz.Thaw(); err != nil {
			return fmt.Errorf("thawing the box: %w", err)
		}
		b.pz.frozen.Store(false)
	}
	if b.pz.runscPaused.Load() {
		// A resume that failed on a box runsc's state says runs (a pause
		// that failed after all) has nothing left to do.
		if err := b.runscCtx(ctx, "resume", b.id); err != nil && b.mayBePaused() {
			return err
		}
		b.pz.runscPaused.Store(false)
	}
	if b.pz.sentryPaused.Load() {
		return b.sentryResume(ctx)
	}
	return nil
}

// pauseWithRunsc makes the box's pauses use runsc pause while on is
// set: a checkpoint sets it around its Session.WhilePaused, so that a
// box it pauses itself never freezes (see stillForSave).
func (b *box) pauseWithRunsc(on bool) {
	b.pz.mu.Lock()
	defer b.pz.mu.Unlock()
	b.pz.viaRunsc = on
}

// stillForSave turns a freeze of the box, or a pause of its sentry
// (sentryToRunscLocked), into a runsc pause: runsc checkpoint asks the
// sentry to save the box, which a frozen sentry never answers, and runsc
// saves a runsc-paused box as a running one. Only a
// box paused before the checkpoint began is frozen here: it runs between
// the thaw and runsc's pause, for the time runsc takes to start and ask
// (about one runsc pause, tens of milliseconds). Its files are copied and
// its memory saved only after that, while it is still, so the checkpoint
// is whole; the save ends the box, and only its clocks, which moved on
// through the pause anyway, show the slice it ran. A save that fails
// leaves the box runsc-paused, which resume undoes. The runsc pause is
// bounded by agent.RuntimeWait, not the checkpoint's wait, and one that
// fails leaves the box paused still (refrozen); one that cannot be is an
// agent.ErrStateUnknown.
func (b *box) stillForSave(ctx context.Context) error {
	b.pz.mu.Lock()
	defer b.pz.mu.Unlock()
	if b.pz.sentryPaused.Load() {
		return b.sentryToRunscLocked(ctx)
	}
	if !b.pz.frozen.Load() {
		return nil
	}
	if err := b.pz.fz.Thaw(); err != nil {
		return fmt.Errorf("thawing the box for runsc's pause: %w", err)
	}
	b.pz.frozen.Store(false)
	pctx, cancel := context.WithTimeout(ctx, agent.RuntimeWait)
	defer cancel()
	_, err := b.runscPause(pctx)
	if err == nil || b.pz.runscPaused.Load() {
		return wrapNil(err, "pausing the box with runsc for its save")
	}
	err = fmt.Errorf("pausing the box with runsc for its save: %w", err)
	ferr := b.freezeLocked()
	if ferr == nil || b.pz.frozen.Load() {
		return errors.Join(err, ferr)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), agent.RuntimeWait)
	defer rcancel()
	if _, perr := b.runscPause(rctx); perr != nil && !b.pz.runscPaused.Load() {
		return fmt.Errorf("%w: the box runs while its session says paused: %w; %w; and runsc pause again: %w", agent.ErrStateUnknown, err, ferr, perr)
	}
	return err
}

// sentryToRunscLocked turns a sentry's pause into a runsc pause for a
// save, without letting the box run: runsc, whose state says running,
// asks the sentry for a second pause and records the box paused; then
// the first is undone, only once runsc surely paused the box (its pause
// worked, or its state says paused). The box stays paused whatever
// fails: a runsc pause that did not surely happen leaves the sentry's
// (and runscPaused where runsc's state could not be read), a sentry's
// resume that was not sent leaves both, which resume undoes; one sent
// and not answered leaves the box in doubt, an agent.ErrStateUnknown
// that ends it.
func (b *box) sentryToRunscLocked(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, agent.RuntimeWait)
	defer cancel()
	if sure, err := b.runscPause(pctx); !sure {
		return fmt.Errorf("pausing the box with runsc for its save (it stays paused through its sentry): %w", err)
	}
	if err := b.sentryResume(pctx); err != nil {
		if b.pz.inDoubt {
			return fmt.Errorf("%w: %w", agent.ErrStateUnknown, err)
		}
		return err
	}
	return nil
}

// wrapNil is err with context what, or nil.
func wrapNil(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// endPause ends a paused box without letting it run again, at the start
// of kill: every process of a frozen box's cgroup (its sentry and gofer)
// is killed while frozen, then thawed so the kill lands, as
// cgroup.endFrozen does; the sentry of a box runsc or the sentry itself
// paused, or runsc saved (which runsc leaves paused), is killed directly
// (killSentry), since both runscs refuse runsc kill on a paused
// container ("cannot signal container in state paused"), Debian's
// (2022-12-19) panics on runsc delete --force of one ("invalid state
// transition: paused => stopped"), and a kill runsc sends into a kernel
// its sentry paused lands only once it resumes. It does not take pz.mu:
// a pause in progress cannot hold a
// kill back. runsc run returns by itself once its sentry died.
func (b *box) endPause() {
	frozen := b.pz.frozen.Swap(false)
	paused := b.pz.runscPaused.Swap(false)
	paused = b.pz.sentryPaused.Swap(false) || paused
	saved := b.pz.saved.Swap(false)
	pausing := b.pz.pausing.Load()
	if frozen {
		b.sentryKilled = true
		if err := killFrozen(b.pz.fz); err != nil {
			b.logger().Warn("killing the frozen box", "err", err)
		}
		return
	}
	if !paused && !saved && !pausing {
		return
	}
	if err := b.killSentry(); err != nil {
		b.logger().Warn("killing the paused box's sentry", "err", err)
	}
}

// killSentry SIGKILLs the box's sentry, the runsc-sandbox child of its
// runsc run (isSentryOf); runsc run then returns, and cleanup deletes
// the container (sentryKilled).
func (b *box) killSentry() error {
	run := b.cmd.Process.Pid
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(run) + "/task")
	if err != nil {
		return fmt.Errorf("listing runsc run's threads: %w", err)
	}
	for _, task := range tasks {
		children, err := os.ReadFile("/proc/" + strconv.Itoa(run) + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(children)) {
			pid, err := strconv.Atoi(f)
			if err != nil || !isSentryOf(pid, run) {
				continue
			}
			b.sentryKilled = true
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("killing the sentry (pid %d): %w", pid, err)
			}
			return nil
		}
	}
	return fmt.Errorf("runsc run (pid %d) has no runsc-sandbox child", run)
}

// killFrozen kills every process of fz's frozen cgroup, which cannot fork
// while frozen, and then thaws it, so that the kills land and nothing
// else runs.
func killFrozen(fz cgroup.Freezer) error {
	pids, err := fz.Procs()
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("listing the processes of %s: %w", fz.Path(), err))
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("killing pid %d: %w", pid, err))
		}
	}
	if err := fz.Thaw(); err != nil {
		errs = append(errs, fmt.Errorf("thawing %s: %w", fz.Path(), err))
	}
	return errors.Join(errs...)
}

// markSaved records that runsc saved the box: it is no longer frozen or
// to be resumed, only ended (endPause).
func (b *box) markSaved() {
	b.pz.mu.Lock()
	defer b.pz.mu.Unlock()
	b.pz.frozen.Store(false)
	b.pz.runscPaused.Store(false)
	b.pz.sentryPaused.Store(false)
	b.pz.inDoubt = false
	b.pz.saved.Store(true)
}

// freezerLocked is the box's freezer, opened at the first call; nil when
// the box has none, or runs on a platform the freezer breaks or one not
// known then (Runtime.platform), which is said once in a debug log and
// holds for the box's life.
func (b *box) freezerLocked() cgroup.Freezer {
	if b.pz.fz != nil || b.pz.noFreezer {
		return b.pz.fz
	}
	if p := b.r.platform(b); p != freezablePlatform {
		b.pz.noFreezer = true
		b.logger().Debug("the box pauses through its sentry: only runsc's ptrace platform survives the cgroup freezer", "platform", p)
		return nil
	}
	fz, err := b.openFreezer()
	if err != nil {
		b.pz.noFreezer = true
		b.logger().Debug("the box has no freezer cgroup of its own; it pauses through its sentry", "err", err)
		return nil
	}
	b.pz.fz = fz
	return fz
}

// openFreezer opens the freezer of the cgroup runsc made for the box and
// checks that it holds the box's sentry, the runsc-sandbox child of the
// box's runsc run (or restore): freezing a cgroup that held only the
// gofer, or nothing, would succeed and stop nothing. The parent is the
// kernel's word; the name, which a process in the box could not forge on
// a child of runsc run, tells the sentry from the gofer.
func (b *box) openFreezer() (cgroup.Freezer, error) {
	if b.cmd == nil || b.cmd.Process == nil {
		return nil, errors.New("the box's runsc has not started")
	}
	fz, err := cgroup.OpenFreezer(cgroupName(b.id))
	if err != nil {
		return nil, err
	}
	pids, err := fz.Procs()
	if err != nil {
		return nil, fmt.Errorf("listing the processes of cgroup %s: %w", fz.Path(), err)
	}
	for _, pid := range pids {
		if isSentryOf(pid, b.cmd.Process.Pid) {
			return fz, nil
		}
	}
	return nil, fmt.Errorf("cgroup %s holds no runsc-sandbox child of runsc (pid %d)", fz.Path(), b.cmd.Process.Pid)
}

// isSentryOf says pid is a runsc-sandbox process whose parent is run.
func isSentryOf(pid, run int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The fields after the command, which is in parentheses, are the
	// state and the parent's pid.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 || f[1] != strconv.Itoa(run) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(cmdline), "\x00")
	return argv0 == "runsc-sandbox"
}

// freezablePlatform is the one runsc platform a box may be frozen on.
// Under systrap (the 2026 runsc's default) a stub's seccomp-notify wait,
// interrupted by the freezer, fails with ENOENT, and the sentry kills the
// stub ("systrap corrupted memory: subprocess died") and the task on it:
// 2 of 4 runs of 60 to 100 freezes of a busy box lost its agent so,
// where runsc pause lost none. kvm was not tried.
const freezablePlatform = "ptrace"

// platformRead is what is known of one runsc binary's default platform:
// name, once read, or that a read is under way (reading).
type platformRead struct {
	name    string
	reading bool
}

// platform is the platform b runs on: Platform, else the default of b's
// runsc binary (box.bin), read from `runsc flags` once per binary until a
// read works, so a runsc installed at the same path while warden runs is
// read again for its own boxes while older boxes keep their binary's.
// "" says it is not known, which is never freezable: the box then pauses
// through its sentry, which is safe on every platform. That is so while
// the read fails (a warning says so; a failure is not kept, so one slow
// read under load does not keep every later box from the freezer), while
// another box's read of the same binary is under way (no box waits for
// another's read, which may take killTimeout), and when the file at the
// path is no longer b's binary (its flags say nothing of b's). The mutex
// is held only to look up and record, never across the read; a read that
// does not record, by an error or a panic, releases its claim, so no
// marker outlives it.
func (r *Runtime) platform(b *box) string {
	if r.Platform != "" {
		return r.Platform
	}
	if p, read := r.claimPlatformRead(b.bin); !read {
		return p
	}
	kept := false
	defer func() {
		if !kept {
			r.platformMu.Lock()
			delete(r.defaultPlatform, b.bin)
			r.platformMu.Unlock()
		}
	}()
	p, err := b.readDefaultPlatform()
	if err != nil {
		b.logger().Warn("runsc's default platform cannot be read; the box pauses through its sentry", "runsc", b.runsc, "err", err)
		return ""
	}
	r.platformMu.Lock()
	r.defaultPlatform[b.bin] = platformRead{name: p}
	r.platformMu.Unlock()
	kept = true
	return p
}

// claimPlatformRead is the default platform of bin, when it was read or a
// read is under way ("" then); read says it was neither, and the caller
// is now the one to read it (platformRead.reading is set), which only it
// records.
func (r *Runtime) claimPlatformRead(bin runscKey) (p string, read bool) {
	r.platformMu.Lock()
	defer r.platformMu.Unlock()
	if e, ok := r.defaultPlatform[bin]; ok {
		if e.reading {
			r.logger().Debug("another box's read of this runsc's default platform is under way; this box pauses through its sentry", "runsc", bin.path)
		}
		return e.name, false
	}
	if r.defaultPlatform == nil {
		r.defaultPlatform = map[runscKey]platformRead{}
	}
	r.defaultPlatform[bin] = platformRead{reading: true}
	return "", true
}

// readDefaultPlatform runs `runsc flags` of b's runsc within killTimeout
// and reads its default platform from it, only while the file at its
// path is b's binary, before the run and after it.
func (b *box) readDefaultPlatform() (string, error) {
	if err := b.sameBinary(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, b.runsc, "flags").CombinedOutput()
	if said := lastLine(bytes.TrimSpace(out)); err != nil && said != "" {
		return "", fmt.Errorf("running %q flags: %w: %s", b.runsc, err, said)
	}
	if err != nil {
		return "", fmt.Errorf("running %q flags: %w", b.runsc, err)
	}
	if err := b.sameBinary(); err != nil {
		return "", err
	}
	return defaultPlatform(string(out)), nil
}

// sameBinary is an error when the file at b's runsc path is not the
// binary b was made with (box.bin), or cannot be read.
func (b *box) sameBinary() error {
	key, err := runscKeyOf(b.runsc)
	if err != nil {
		return err
	}
	if key != b.bin {
		return fmt.Errorf("runsc %q is no longer the binary the box started with (reinstalled while the box ran)", b.runsc)
	}
	return nil
}

// defaultPlatform is the default of the -platform flag in the output of
// `runsc flags`: the line after "-platform string" ends with
// (default "ptrace").
func defaultPlatform(flags string) string {
	_, rest, ok := strings.Cut(flags, "-platform string\n")
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(rest, "\n")
	_, def, ok := strings.Cut(line, `(default "`)
	if !ok {
		return ""
	}
	def, _, ok = strings.Cut(def, `"`)
	if !ok {
		return ""
	}
	return def
}
