package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/scratch"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
)

// Store keeps sessions across a crash of the server: a record per session
// and persistent workspaces. *state.Dir is the real one.
type Store interface {
	SaveSession(state.Session) error
	// SaveSessionSync is SaveSession fsync'd, for a snapshot's
	// transitions, which a crash of the host must not undo either.
	SaveSessionSync(state.Session) error
	RemoveSession(id string) error
	Sessions() ([]state.Session, error)
	NewWorkspace(size, inodes int64) (state.Workspace, error)
	WorkspacePath(name string) string
	OpenFiles(name string) (*os.File, error)
	DropWorkspace(name string) error
	SealWorkspace(name string) error
	Mounted(name string) bool
	HasWorkspace(name string) bool
	Workspaces() ([]string, error)
}

// HostWorkspaces is implemented by a backend that can bind a host
// directory as a session's /workspace (spec.Workspace), which persistent
// workspaces need; with other backends a Store keeps records only.
type HostWorkspaces interface {
	HostWorkspaces() bool
}

// Recovery is what a Manager found in its Store at start: the sessions of
// a server that died without ending them.
type Recovery struct {
	// Sessions is how many came back: snapshotted ones (Snapshotted of
	// them) as they were, resumable; all others dead. Lost is how many of
	// the dead had lost their workspace (the host restarted, or the
	// backend kept it inside the sandbox).
	Sessions, Snapshotted, Lost int
	// Dropped counts workspaces no record named (a create or a pooled
	// sandbox the crash cut short), now removed, and DroppedSnapshots
	// snapshots no record named (a snapshot or a fork the crash cut
	// short); Stale counts records of
	// sessions deleted when their record could not be removed, removed now.
	Dropped, DroppedSnapshots, Stale int
	// Err lists records that could not be read or updated.
	Err error
}

// persistsWorkspaces says whether sessions get workspaces from the Store.
func persistsWorkspaces(b Backend, st Store) bool {
	hw, ok := b.(HostWorkspaces)
	return st != nil && ok && hw.HostWorkspaces()
}

// startBox builds a sandbox from s; with persistent workspaces it makes
// one first and binds it in. The workspace's name is returned with it.
func (m *Manager) startBox(ctx context.Context, s spec.Spec) (Box, string, error) {
	if !m.persist {
		b, err := m.backend.Start(ctx, s)
		return b, "", err
	}
	ws, err := m.cfg.Store.NewWorkspace(s.Limits.DiskBytes, s.Limits.Inodes())
	if err != nil {
		return nil, "", err
	}
	s.Scratch = ws.Path
	if s.Root.Dir != "" {
		// A committed template's home and /workspace start the session:
		// the workspace is the host's here, so the host copies them; the
		// backend sees a host scratch and seeds nothing itself.
		if err := scratch.Seed(ws.Path, s.Root.Dir, scratch.Kept); err != nil {
			m.dropWorkspace(ws.Name, "")
			return nil, "", fmt.Errorf("template %q: %w", s.Root.Template, err)
		}
	}
	b, err := m.backend.Start(ctx, s)
	if err != nil {
		m.dropWorkspace(ws.Name, "")
		return nil, "", err
	}
	return b, ws.Name, nil
}

// discardBox closes a box nobody will use and drops its workspace.
func (m *Manager) discardBox(b Box, ws string) {
	if err := b.Close(); err != nil {
		m.cfg.Logger.Warn("closing an unused sandbox", "backend", m.backend.Name(), "err", err)
	}
	if ws != "" {
		m.dropWorkspace(ws, "")
	}
}

// dropWorkspace removes workspace ws, of session sid ("" for a box no
// session holds yet), logging a failure: what is left is the Store's to
// report (doctor --leaks), and nobody waits on it.
func (m *Manager) dropWorkspace(ws, sid string) {
	if err := m.cfg.Store.DropWorkspace(ws); err != nil {
		m.cfg.Logger.Warn("removing a workspace", "session", sid, "workspace", ws, "err", err)
	}
}

// record is s as the Store keeps it.
func (m *Manager) record(s *session) state.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.recordLocked(s)
}

// recordLocked is record with s.mu held. The env (which may hold keys)
// is written only while s is snapshotted, the one state a next server
// starts a box from it; a running session's stays in memory.
func (m *Manager) recordLocked(s *session) state.Session {
	var env []string
	if s.snap != "" {
		env = s.spec.Env
	}
	return state.Session{
		ID: s.id, Owner: s.owner, Backend: m.backend.Name(), Workspace: s.ws, ServerPID: os.Getpid(),
		CreatedAt: s.created, ExpiresAt: s.expires, IdleTimeout: s.idle,
		Limits: s.spec.Limits, Network: s.spec.Network, DiedAt: s.diedAt, Reason: s.reason,
		Template: s.spec.Root.Template, TemplateDigest: s.spec.Root.Digest,
		Paused: s.state == StatePaused, AutoPause: s.autoPause, AutoSnapshot: s.autoSnapshot, Env: env,
		Snapshot: s.snap, SnapshottedAt: s.snapAt,
		SnapshotBytes: s.snapStats.Bytes, SnapshotFiles: s.snapStats.Files, SnapshotDirs: s.snapStats.Dirs, SnapshotSkipped: s.snapStats.Skipped,
		SnapshotMemoryBytes: s.snapMemory, SnapshotInterpreters: s.snapInterps,
	}
}

// save writes s's record, if there is a Store.
func (m *Manager) save(s *session) error {
	if m.cfg.Store == nil {
		return nil
	}
	return m.cfg.Store.SaveSession(m.record(s))
}

// forget removes s's record and workspace from the Store.
func (m *Manager) forget(s *session) error {
	if m.cfg.Store == nil {
		return nil
	}
	err := m.cfg.Store.RemoveSession(s.id)
	if s.ws != "" {
		err = errors.Join(err, m.cfg.Store.DropWorkspace(s.ws))
	}
	if m.cfg.Snapshots == nil {
		return err
	}
	s.mu.Lock()
	names := []string{s.snap, s.staleSnap}
	s.mu.Unlock()
	for _, name := range names {
		if name != "" {
			err = errors.Join(err, m.dropUnpinned(name))
		}
	}
	return err
}

// bury turns a session whose sandbox died into a dead one: its processes
// and box are gone, a persistent workspace stays, read-only, for its files
// to be fetched until it is deleted or expires (without one, only the
// session's record and its reason stay). It gives back the session's
// slot, and says whether it buried s (false: s was dead or ending).
//
// The workspace is sealed before the session is marked dead, so no one
// writes through a dead session; the record is written with s.mu held and
// only while the session is still dead, so a Delete racing with the
// burial (which removes the record once it has marked the session
// stopping) is never undone.
func (m *Manager) bury(s *session, why string) bool {
	if st := s.currentState(); st != StateReady && st != StateBusy && st != StatePaused {
		return false
	}
	var sealErr error
	if s.ws != "" {
		sealErr = m.cfg.Store.SealWorkspace(s.ws)
	}
	s.mu.Lock()
	if s.state != StateReady && s.state != StateBusy && s.state != StatePaused {
		s.mu.Unlock()
		return false
	}
	paused := s.pausedSlot || s.state == StatePaused
	s.state = StateDead
	s.diedAt, s.reason, s.lastUsed = time.Now(), why, time.Now()
	s.shedLocked()
	interps, dir := s.interps, s.dir
	s.interps, s.dir = nil, nil
	s.mu.Unlock()
	m.cleanedUp(s, s.closeBox(paused, interps, dir))
	m.giveBack(s)
	s.releaseTemplate()
	s.mu.Lock()
	var saveErr error
	if s.state == StateDead && m.cfg.Store != nil {
		saveErr = m.cfg.Store.SaveSession(m.recordLocked(s))
	}
	s.mu.Unlock()
	if err := errors.Join(sealErr, saveErr); err != nil {
		m.cfg.OnStoreError(err)
	}
	m.keep(s, m.keptDisk(s))
	m.trimDead(s.owner)
	return true
}

// recoverSessions brings back the sessions a crashed server left in the
// Store, as dead ones, and drops workspaces no session owns. It runs
// before the pool starts making workspaces of its own.
//
// A record whose workspace directory is gone altogether belongs to a
// session that was deleted when its record could not be removed (a
// read-only directory): the record is removed now. When any record could
// not be read, no workspace is dropped: it may be that record's.
func (m *Manager) recoverSessions() Recovery {
	var r Recovery
	recs, err := m.cfg.Store.Sessions()
	r.Err = err
	owned, snaps := map[string]bool{}, map[string]bool{}
	now := time.Now()
	for _, rec := range recs {
		if rec.Workspace != "" && !m.cfg.Store.HasWorkspace(rec.Workspace) {
			r.Err = errors.Join(r.Err, m.cfg.Store.RemoveSession(rec.ID))
			r.Stale++
			continue
		}
		s := m.revive(rec, now)
		if s.state == StateSnapshotted {
			r.Snapshotted++
			snaps[s.snap] = true
		} else if rec.Workspace != "" && s.ws == "" || rec.Workspace == "" {
			r.Lost++
		}
		owned[s.ws] = true
		if err := m.save(s); err != nil {
			r.Err = errors.Join(r.Err, err)
		}
		m.sessions[s.id] = s
		if s.snapSlot {
			m.snapshots.add(s.owner)
		}
		if kept := m.keptDisk(s); kept > 0 {
			m.held[s.id] = kept
			m.bytesByOwner[s.owner] += kept
		}
		r.Sessions++
	}
	if r.Err != nil {
		return r
	}
	if m.cfg.Snapshots != nil {
		n, err := m.cfg.Snapshots.Sweep(snaps)
		r.DroppedSnapshots = n
		r.Err = errors.Join(r.Err, err)
	}
	names, err := m.cfg.Store.Workspaces()
	r.Err = errors.Join(r.Err, err)
	for _, name := range names {
		if !owned[name] {
			r.Err = errors.Join(r.Err, m.cfg.Store.DropWorkspace(name))
			r.Dropped++
		}
	}
	return r
}

// revive makes the session rec describes: snapshotted, as it was, when
// its snapshot is there; else dead. A dead one's workspace is kept if it
// is still mounted (the server died, the host did not), and sealed.
func (m *Manager) revive(rec state.Session, now time.Time) *session {
	s, over := m.reviveSnapshotted(rec, now)
	if s != nil {
		return s
	}
	s = m.reviveDead(rec, now)
	if over != nil {
		// Its snapshot, which no record names now, is swept.
		s.reason = fmt.Sprintf("it was snapshotted, but its limits are not allowed on this server: %s", strings.TrimPrefix(over.Error(), spec.ErrInvalid.Error()+": "))
	}
	return s
}

// reviveDead makes the dead session rec describes.
func (m *Manager) reviveDead(rec state.Session, now time.Time) *session {
	s := &session{
		id: rec.ID, owner: rec.Owner, box: deadBox{}, state: StateDead, files: m.cfg.Files, store: m.cfg.Store,
		spec:    spec.Spec{Limits: rec.Limits, Network: rec.Network, Root: spec.Root{Template: rec.Template, Digest: rec.TemplateDigest}},
		created: rec.CreatedAt, lastUsed: now, expires: rec.ExpiresAt, idle: rec.IdleTimeout,
		ws: rec.Workspace, diedAt: rec.DiedAt, reason: rec.Reason, gone: make(chan struct{}), autoPause: rec.AutoPause,
	}
	// The caps of this server bind sessions a former one made, too.
	if last := rec.CreatedAt.Add(m.cfg.MaxTTL); s.expires.After(last) {
		s.expires = last
	}
	s.idle = min(s.idle, m.cfg.MaxIdle)
	if s.diedAt.IsZero() {
		s.diedAt = now
		s.reason = fmt.Sprintf("the server (pid %d) stopped without ending the session, and its sandbox was killed", rec.ServerPID)
		if rec.Paused {
			// A paused box's memory lived in the server's sandbox, which
			// is gone: it comes back dead, never half paused.
			s.reason = fmt.Sprintf("the server (pid %d) stopped while the session was paused, and its sandbox was killed", rec.ServerPID)
		}
	}
	if rec.Snapshot != "" {
		s.reason = fmt.Sprintf("its snapshot %s is gone from the state directory", rec.Snapshot)
	}
	s.reason += m.templateGone(rec.Template, rec.Owner)
	switch {
	case rec.Workspace == "":
		s.reason += "; its workspace was inside the sandbox and is gone"
	case !m.cfg.Store.Mounted(rec.Workspace):
		m.dropWorkspace(rec.Workspace, rec.ID)
		s.ws = ""
		s.reason += "; its workspace was lost (the host restarted)"
	default:
		// A workspace that cannot be sealed is still served read-only
		// (see deadWorkspace); the error reaches the operator.
		if err := m.cfg.Store.SealWorkspace(rec.Workspace); err != nil {
			m.cfg.OnStoreError(err)
		}
	}
	return s
}

// reviveSnapshotted makes the snapshotted session rec describes, or nil
// when rec is not snapshotted or its snapshot is gone. Its box is a
// deadBox until a resume starts one; it holds a snapshot slot (past
// MaxSnapshots if a former server allowed more: it is the operator's to
// delete) and its snapshot's charge of its owner's budget. One whose
// limits this server's ceilings refuse is nil too, with why (over): a
// resume would start a box a create could not.
func (m *Manager) reviveSnapshotted(rec state.Session, now time.Time) (s *session, over error) {
	if rec.Snapshot == "" || m.cfg.Snapshots == nil || !m.cfg.Snapshots.Has(rec.Snapshot) || !rec.DiedAt.IsZero() {
		return nil, nil
	}
	if err := m.allowed(spec.Spec{Limits: rec.Limits, Network: rec.Network, Env: rec.Env}); err != nil {
		return nil, err
	}
	s = &session{
		id: rec.ID, owner: rec.Owner, box: deadBox{}, boxClosed: true, state: StateSnapshotted, files: m.cfg.Files, store: m.cfg.Store,
		spec: spec.Spec{
			Limits: rec.Limits, Network: rec.Network, Env: rec.Env,
			Root: spec.Root{Template: rec.Template, Digest: rec.TemplateDigest},
		},
		created: rec.CreatedAt, lastUsed: now, expires: rec.ExpiresAt, idle: min(rec.IdleTimeout, m.cfg.MaxIdle),
		gone: make(chan struct{}), autoPause: rec.AutoPause, autoSnapshot: rec.AutoSnapshot, snap: rec.Snapshot, snapAt: rec.SnapshottedAt, snapSlot: true,
		snapStats: snapshot.Stats{Bytes: rec.SnapshotBytes, Files: rec.SnapshotFiles, Dirs: rec.SnapshotDirs, Skipped: rec.SnapshotSkipped},
		pace:      newExecPacer(rec.Limits.CPUs, m.cfg.ExecPace),
	}
	// The record is the state directory's, written by a server, but read
	// strictly all the same: a bad interpreter list costs only the
	// interpreters, which then start afresh.
	if rec.SnapshotMemoryBytes > 0 && m.cfg.Snapshots.MemoryPath(rec.Snapshot) != "" {
		s.snapMemory = rec.SnapshotMemoryBytes
		if err := validInterpreters(rec.SnapshotInterpreters); err != nil {
			m.cfg.Logger.Warn("a snapshot's interpreters are not valid; they start afresh at its resume", "session", rec.ID, "err", err)
		} else {
			s.snapInterps = rec.SnapshotInterpreters
		}
	}
	if last := rec.CreatedAt.Add(m.cfg.MaxTTL); s.expires.After(last) {
		s.expires = last
	}
	return s, nil
}

// deadBox stands for the sandbox of a session recovered dead: there is
// nothing left to run in or to close.
type deadBox struct{}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (deadBox) Spawn(context.Context, interp.Command) (interp.Process, error) {
	return nil, ErrDead
}
func (deadBox) Exec(context.Context, Command, Stream) (spec.Result, error) {
	return spec.Result{}, ErrDead
}
func (deadBox) Env(extra ...string) []string       { return extra }
func (deadBox) Workspace() *os.File                { return nil }
func (deadBox) FileOwner() (int, int)              { return hostid.WorkspaceOwner, hostid.WorkspaceOwner }
func (deadBox) Usage() (time.Duration, uint64)     { return 0, 0 }
func (deadBox) SetNetwork(_, _ []string) error     { return ErrDead }
func (deadBox) NetworkEvents() []spec.NetworkEvent { return nil }
func (deadBox) Done() <-chan struct{}              { return closedChan }
func (deadBox) Err() error                         { return ErrDead }
func (deadBox) Close() error                       { return nil }
func (deadBox) Pause(context.Context) error        { return ErrDead }
func (deadBox) Resume(context.Context) error       { return ErrDead }
