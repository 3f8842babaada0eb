package sandbox

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Snapshotting a session writes its /workspace to disk (Config.Snapshots)
// and closes its box, so it holds no memory, no run slot and no paused
// slot, only one of MaxSnapshots and the bytes of its files against its
// owner's budget. It keeps its id, template, limits, network, env and
// TTL; its idle timer stops. A resume (or an exec, a spawn, a file call)
// starts a fresh box of the same spec and restores the files: processes
// and interpreters start fresh. On a MemoryBackend (gVisor over the
// stream) the box is saved whole beside the files too, and a resume
// restores it, interpreters adopted (see memory.go).
//
// The steps, each leaving a state a crash recovers whole: the box is
// paused (files stop changing); the files are copied into a temporary
// directory, fsync'd and renamed into place (snapshot.Pending.Commit);
// on a MemoryBackend, the box is saved, which ends it, and its image
// fsync'd and renamed beside the files (Pending.CommitMemory; a failure
// drops the image only); the record is written, fsync'd, naming the
// snapshot (from here on the session is snapshotted, also for the next
// server); the box is closed and its workspace dropped. A crash before
// the record leaves the session as it was (running or paused, which a
// restart reports dead, as ever) and an orphan snapshot the next server
// sweeps; after it, a snapshotted session the next server lists and
// resumes. Once a save has ended the box, a record that cannot be
// written leaves the session snapshotted in this server (see
// snapshotPaused).

// stepHook, when set (by tests only), is called at each step of a
// snapshot, a resume from one and a fork's copy, so a test can stop
// there as a crash would, or act there as another call would; nil in
// every build of the server.
var stepHook func(step string)

func step(name string) {
	if stepHook != nil {
		stepHook(name)
	}
}

// Snapshot writes one of owner's sessions to disk and closes its box;
// snapshotting a snapshotted one does nothing. A session running an exec
// answers ErrBusy, as for Pause; a server without a state directory,
// ErrUnsupported; no snapshot slot left, ErrTooMany; a full disk,
// state.ErrStorage. On any failure the session is as it was. o.Memory
// asks for the box's memory too, where the backend can save it.
func (m *Manager) Snapshot(ctx context.Context, owner, id string, o SnapshotOptions) (Info, error) {
	if err := m.refuseRemote("snapshot"); err != nil {
		return Info{}, err
	}
	if m.cfg.Snapshots == nil {
		return Info{}, fmt.Errorf("%w: snapshots need a state directory: start warden serve with --state-dir", ErrUnsupported)
	}
	return m.switchPaced(ctx, owner, id, func(ctx context.Context, s *session) error { return m.snapshot(ctx, s, o) })
}

// MaxSnapshots is how many sessions may be snapshotted at once.
func (m *Manager) MaxSnapshots() int { return m.cfg.MaxSnapshots }

func (m *Manager) snapshot(ctx context.Context, s *session, o SnapshotOptions) error {
	st := s.currentState()
	if o.keepRun != nil && st == StatePaused {
		return errNotRunning
	}
	if st == StateSnapshotted {
		return s.refuseForkHeld("snapshot")
	}
	if err := m.takeSnapshotSlot(s.owner); err != nil {
		return err
	}
	cp, err := m.pauseForCopy(ctx, s)
	if err != nil {
		m.giveSnapshotSlot(s.owner)
		return err
	}
	step("copy paused")
	err = m.snapshotPaused(ctx, s, o)
	switch {
	case errors.Is(err, errSnapshotted):
		// Another call snapshotted it meanwhile: what was asked is done.
		m.giveSnapshotSlot(s.owner)
		return nil
	case errors.Is(err, errNotRunning):
		// Paused by another call meanwhile: left paused.
		m.giveSnapshotSlot(s.owner)
		m.undoCopyPause(ctx, s, cp, "snapshot")
		return err
	}
	if err != nil {
		m.giveSnapshotSlot(s.owner)
		m.undoCopyPause(ctx, s, cp, "snapshot")
	}
	return err
}

// undoCopyPause ends a copy's (doing's) hold on copy pause cp, taken by
// pauseForCopy, once the copy failed or ended: the last copy to end
// resumes s in the run slot it kept. s is left as it is if it is no
// longer in cp: paused by its user or auto-pause meanwhile (who took the
// pause over), resumed, snapshotted or ended. cp nil holds nothing.
func (m *Manager) undoCopyPause(ctx context.Context, s *session, cp *copyPause, doing string) {
	step("undo copy pause")
	if cp == nil {
		return
	}
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if !s.dropCopyHold(cp) {
		return
	}
	if err := m.resumeLocked(ctx, s); err != nil && !errors.Is(err, ErrClosed) {
		m.cfg.Logger.Warn("resuming a session paused for a copy", "copy", doing, "session", s.id, "err", err)
	}
}

// dropCopyHold gives up one copy's hold on cp, and says whether s is
// still in it with no other copy holding it, for that copy to resume.
func (s *session) dropCopyHold(cp *copyPause) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StatePaused || s.copyPause != cp {
		return false
	}
	cp.held--
	return cp.held == 0
}

// snapshotPaused copies paused s's files into a snapshot, records it and
// closes the box; on failure s is still paused and nothing is kept,
// except once a memory save has ended the box: the snapshot is then all
// there is of s, which stays snapshotted, its record failure reported.
func (m *Manager) snapshotPaused(ctx context.Context, s *session, o SnapshotOptions) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	switch st := s.currentState(); st {
	case StateSnapshotted:
		return errSnapshotted
	case StatePaused:
	default:
		return fmt.Errorf("%w: session %s was resumed or ended while it was being snapshotted; retry", ErrBusy, s.id)
	}
	if o.keepRun != nil && !s.holdsRunSlot() {
		return errNotRunning
	}
	// File calls stay refused from before the copy until the record is
	// written (or the copy failed and s is paused again): a write between
	// the copy's end and the record would land in a box about to close.
	m.beginCopy(s)
	defer s.beginSave()()
	var mem memorySaved
	name, stats, err := m.capture(ctx, s, s.currentBox(), m.cfg.Snapshots.Begin, func(ctx context.Context, p *snapshot.Pending) {
		if o.Memory {
			mem = m.saveMemory(ctx, s, p)
		}
	})
	if err == nil && o.memoryOrNothing && mem.bytes == 0 && !mem.ended {
		m.dropSnapshot(name, s.id)
		err = errNoMemory
	}
	if err != nil {
		s.endCopy()
		return err
	}
	step("committed")
	s.mu.Lock()
	s.copying = false
	if s.state != StatePaused {
		s.mu.Unlock()
		m.dropSnapshot(name, s.id)
		return fmt.Errorf("%w: session %s ended while it was being snapshotted", ErrClosed, s.id)
	}
	ws, cp := s.ws, s.copyPause
	s.state, s.snap, s.snapAt, s.snapStats, s.ws = StateSnapshotted, name, time.Now(), stats, ""
	s.snapMemory, s.snapInterps, s.copyPause = mem.bytes, mem.interps, nil
	saveErr := m.saveDurablyLocked(s)
	if saveErr != nil && !mem.ended {
		s.state, s.snap, s.snapAt, s.snapStats, s.ws = StatePaused, "", time.Time{}, snapshot.Stats{}, ws
		s.snapMemory, s.snapInterps, s.copyPause = 0, nil, cp
		s.mu.Unlock()
		m.dropSnapshot(name, s.id)
		return saveErr
	}
	interps, dir, pausedSlot, runSlot := s.interps, s.dir, s.pausedSlot, s.slot
	s.interps, s.interpProcs, s.dir, s.boxClosed, s.snapSlot, s.pausedSlot, s.pausedAt = nil, nil, nil, true, true, false, time.Time{}
	s.slot = false
	s.mu.Unlock()
	step("recorded")
	m.cleanedUp(s, s.closeBox(true, interps, dir))
	if pausedSlot {
		m.givePaused(s.owner)
	}
	switch {
	case runSlot && o.keepRun != nil:
		*o.keepRun = heldRun{held: true, bytes: m.detachHeld(s)}
		s.setForkHeld(true)
		m.hold(s, s.snapCharge())
	case runSlot:
		m.release(s.owner, 0)
		m.settle(s, s.snapCharge())
	default:
		m.settle(s, s.snapCharge())
	}
	if ws != "" {
		m.dropWorkspace(ws, s.id)
	}
	if saveErr != nil {
		// The save ended the box: the snapshot is all that is left of
		// the session, so it stays snapshotted here though its record
		// still says otherwise. A resume or the session's end writes
		// the record again; a crash before then loses it (the next
		// server reports it dead and sweeps the snapshot).
		m.cfg.Logger.Warn("the record of a snapshotted session could not be written; it stays snapshotted in this server only", "session", s.id, "err", saveErr)
		m.cfg.OnStoreError(saveErr)
	}
	return nil
}

// refuseForkHeld is ErrBusy for doing to s while a fork holds it
// snapshotted (forkHeld), else nil.
func (s *session) refuseForkHeld(doing string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forkHeld {
		return fmt.Errorf("%w: session %s is being forked and runs on after; %s it once the fork has answered", ErrBusy, s.id, doing)
	}
	return nil
}

func (s *session) setForkHeld(held bool) {
	s.mu.Lock()
	s.forkHeld = held
	s.mu.Unlock()
}

// errNotRunning is a keepRun snapshot's answer for a session that is
// paused, not running: it has no run slot to keep, and is left paused.
var errNotRunning = errors.New("the session is paused")

// holdsRunSlot says s holds a run slot (it runs, or is paused for a copy).
func (s *session) holdsRunSlot() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slot
}

// errNoMemory is a memoryOrNothing snapshot's answer when the box's
// memory could not be saved and the box runs on (the log says why).
var errNoMemory = errors.New("the sandbox's memory could not be saved")

// snapCharge is what s's snapshot costs its owner's budget: its files'
// charge and the size of its saved memory.
func (s *session) snapCharge() int64 { return s.snapStats.Charge() + s.snapMemory }

// capture writes the files of box, s's, into a new committed snapshot,
// begun by begin (the store's Begin, or BeginTemporary for one no record
// names), and, if more is not nil, has it add to the snapshot once its
// files are committed (the box's memory), with a ctx s's end cancels:
// whatever more does, the files are kept. Its caller refuses file calls
// meanwhile (see beginCopy).
func (m *Manager) capture(ctx context.Context, s *session, box Box, begin func() (*snapshot.Pending, error), more func(context.Context, *snapshot.Pending)) (string, snapshot.Stats, error) {
	ctx, release := s.stopOnEnd(ctx)
	defer release()
	done, err := m.copySlot(ctx)
	if err != nil {
		return "", snapshot.Stats{}, fmt.Errorf("snapshotting session %s: %w", s.id, err)
	}
	defer done()
	lim := snapshotLimits(s.spec.Limits)
	uid, gid := box.FileOwner()
	src, err := workspace.FromFile(box.Workspace(), "/workspace of "+s.id, uid, gid, snapshot.WorkspaceLimits(lim))
	if err != nil {
		return "", snapshot.Stats{}, fmt.Errorf("opening the workspace of session %s: %w", s.id, err)
	}
	defer closeLogged(m, src, s.id)
	p, err := begin()
	if err != nil {
		return "", snapshot.Stats{}, m.snapshotError(s.id, "snapshotting", err)
	}
	step("begun")
	stats, err := p.Capture(ctx, src, lim)
	if err == nil {
		step("captured")
		err = p.Commit()
	} else if aerr := p.Abort(); aerr != nil {
		m.cfg.Logger.Warn("removing an unfinished snapshot", "session", s.id, "err", aerr)
	}
	if err != nil {
		return "", stats, m.snapshotError(s.id, "snapshotting", err)
	}
	if more != nil {
		more(ctx, p)
	}
	return p.Name(), stats, nil
}

// maxCopies is how many snapshot copies (captures and restores) run at
// once on a server: each is disk I/O and fsyncs on the state directory's
// disk, which many at once would take from every other session.
const maxCopies = 2

// copySlot waits for one of the server's copy slots, as long as ctx
// lets it; done gives it back. A wait that ends with ctx is ErrBusy (a
// retry later may find a slot), so auto-snapshot retries the next round
// instead of ending the session: other sessions' copies, perhaps all one
// key's, are no fault of this one.
func (m *Manager) copySlot(ctx context.Context) (done func(), err error) {
	select {
	case m.copies <- struct{}{}:
		return func() { <-m.copies }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for other snapshot copies to end; retry: %w", ErrBusy, ctx.Err())
	}
}

// beginCopy marks s's files as being copied, so file calls are refused
// (a write then would be missing from the copy, and lost once the box
// closes), and closes s's open workspace, which waits for the file
// calls already in it to end.
func (m *Manager) beginCopy(s *session) {
	s.mu.Lock()
	s.copying = true
	dir := s.dir
	s.dir = nil
	s.mu.Unlock()
	if dir != nil {
		closeLogged(m, dir, s.id)
	}
}

// endCopy lets file calls reach s's files again.
func (s *session) endCopy() {
	s.mu.Lock()
	s.copying = false
	s.mu.Unlock()
}

// storageError is what a caller is told of a snapshot's failed copy:
// a full or failing disk as state.ErrStorage, a workspace over its
// limits as invalid, so front ends answer each right. The store's own
// errors name host paths under the state directory, so they are told
// in a line of their own; public says err was replaced, and the caller
// logs the full error for the operator.
func storageError(err error) (told error, public bool) {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: the state directory is full: free space there or delete snapshotted sessions", state.ErrStorage), true
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: the state directory cannot be written", state.ErrStorage), true
	case errors.Is(err, snapshot.ErrTooLarge):
		return fmt.Errorf("%w: %w", spec.ErrInvalid, err), false // names workspace paths only
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), workspaceError(err):
		return err, false
	}
	return errors.New("the snapshot failed on the server's state directory; the server's log has the detail"), true
}

// workspaceError says err is workspace.Dir's, which names paths inside
// /workspace only.
func workspaceError(err error) bool {
	for _, kind := range []error{workspace.ErrNotFound, workspace.ErrExists, workspace.ErrIsDir, workspace.ErrNotDir,
		workspace.ErrNotEmpty, workspace.ErrDenied, workspace.ErrBadPath, workspace.ErrTooLarge, workspace.ErrTruncated,
		workspace.ErrNotRegular, workspace.ErrHardLink, workspace.ErrLink, workspace.ErrBusy} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// snapshotError is storageError for the copy (doing) of session id's
// files, logging the full error when the caller is told another line.
func (m *Manager) snapshotError(id, doing string, err error) error {
	told, public := storageError(err)
	if public {
		m.cfg.Logger.Warn(doing+" a session's files failed", "session", id, "err", err)
	}
	return fmt.Errorf("%s session %s: %w", doing, id, told)
}

// snapshotLimits bound a session's snapshot by its own disk and inode
// limits, which its files are within already.
func snapshotLimits(l spec.Limits) snapshot.Limits {
	return snapshot.Limits{MaxBytes: l.DiskBytes, MaxEntries: int(min(l.Inodes(), 1<<30))}
}

func closeLogged(m *Manager, d workspace.Files, id string) {
	if err := d.Close(); err != nil {
		m.cfg.Logger.Warn("closing a workspace", "session", id, "err", err)
	}
}

// dropSnapshot removes snapshot name, of session sid, logging a failure:
// the next server's sweep removes what is left.
func (m *Manager) dropSnapshot(name, sid string) {
	if err := m.dropUnpinned(name); err != nil {
		m.cfg.Logger.Warn("removing a snapshot", "session", sid, "snapshot", name, "err", err)
	}
}

// dropUnpinned removes snapshot name, or, while a fork copies from it,
// has the fork's unpin remove it.
func (m *Manager) dropUnpinned(name string) error {
	m.mu.Lock()
	if m.pins[name] > 0 {
		m.unpinnedDrop[name] = true
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	return m.cfg.Snapshots.Drop(name)
}

// pinSnapshot keeps snapshot name on disk, whatever drops it meanwhile
// (a resume, a Delete), until the returned unpin: a fork copies from it.
func (m *Manager) pinSnapshot(name, sid string) (unpin func()) {
	m.mu.Lock()
	m.pins[name]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		m.pins[name]--
		drop := m.pins[name] == 0 && m.unpinnedDrop[name]
		if m.pins[name] == 0 {
			delete(m.pins, name)
			delete(m.unpinnedDrop, name)
		}
		m.mu.Unlock()
		if drop {
			m.dropSnapshot(name, sid)
		}
	}
}

// saveDurablyLocked writes s's record for a state change a crash must
// not undo; without a Store the change is refused, as there is nothing
// a snapshot could be found through. s.mu is held.
func (m *Manager) saveDurablyLocked(s *session) error {
	if m.cfg.Store == nil {
		return fmt.Errorf("%w: snapshots need a state directory: start warden serve with --state-dir", ErrUnsupported)
	}
	if err := m.cfg.Store.SaveSessionSync(m.recordLocked(s)); err != nil {
		return fmt.Errorf("saving session %s: %w", s.id, err)
	}
	return nil
}

// takeSnapshotSlot takes one of the snapshot slots for owner (see
// takeCounted).
func (m *Manager) takeSnapshotSlot(owner string) error {
	return m.takeCounted(&m.snapshots, m.cfg.MaxSnapshots, owner)
}

// giveSnapshotSlot gives back one of owner's snapshot slots.
func (m *Manager) giveSnapshotSlot(owner string) { m.giveCounted(&m.snapshots, owner) }

// currentBox is s's box, which a resume from a snapshot replaces.
func (s *session) currentBox() Box {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.box
}

// isBoxClosed says s's box was closed for a snapshot or its end.
func (s *session) isBoxClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxClosed
}
