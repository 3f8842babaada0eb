package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
)

// MemoryBackend is a Backend that can save a live box whole, the memory
// and processes of everything in it, and start new boxes from what it
// saved (gVisor over the stream transport: gvisor.Runtime.Checkpoint and
// Restore). A snapshot of a session on it keeps the box's memory beside
// its files, and a resume or a fork restores it; every other backend's
// snapshot keeps files only.
type MemoryBackend interface {
	// SavesMemory says why a box of s cannot be saved whole (the stream
	// transport is off, runsc cannot save the egress bridge's listener), or nil.
	SavesMemory(s spec.Spec) error
	// SaveMemory saves running box into dir, a directory it makes. The
	// box ends with the save; one refused before it (ErrCannotSave)
	// runs on untouched.
	SaveMemory(ctx context.Context, box Box, dir string) error
	// RestoreMemory starts a new box of s from dir, which it only reads:
	// it can be restored again (a fork).
	RestoreMemory(ctx context.Context, s spec.Spec, dir string) (Box, error)
}

// errFilesOnly is why a server with Config.FilesOnlySnapshots keeps no
// box's memory.
var errFilesOnly = errors.New("the server keeps snapshots to files (--snapshot-memory=false)")

// ErrCannotSave is wrapped by SaveMemory's error when the box was refused
// before the save and runs on as it was.
var ErrCannotSave = errors.New("the sandbox cannot be saved whole")

// liveAdopter is a box restored with its processes running (an agent
// session over the stream transport): Live lists them by the IDs they
// had, and Adopt takes one over for an interpreter.
type liveAdopter interface {
	interp.Adopter
	Live() map[uint64][]string
}

// liveDropper is a restored box that can end a process it lists which
// nobody will adopt (agent.Session.DropLive): a front end's command or an
// interpreter not taken over, whose output nobody reads any more.
type liveDropper interface{ DropLive(id uint64) error }

// processCounter is a box whose agent numbers the processes it starts
// (agent.Session.LastID), so an interpreter's process can be named in a
// memory snapshot.
type processCounter interface{ LastID() uint64 }

// idSpawner starts an interpreter's processes on its box and keeps the ID
// of the last one, which a memory snapshot records so the restore can
// adopt it. An ID is kept only when nothing else started a process on
// the box between its two reads of LastID; else it is 0, unknown, and the
// interpreter starts afresh after a restore.
type idSpawner struct {
	box      Box
	ids      processCounter
	language string
	name     string
	id       atomic.Uint64
}

func (p *idSpawner) Spawn(ctx context.Context, c interp.Command) (interp.Process, error) {
	before := p.ids.LastID()
	proc, err := p.box.Spawn(ctx, c)
	after := p.ids.LastID()
	if err == nil && after == before+1 {
		p.id.Store(after)
	} else {
		p.id.Store(0)
	}
	return proc, err
}

// spawnerFor is what s's interpreter language/name starts its processes
// with: an idSpawner where the box numbers them, kept in s.interpProcs
// for a memory snapshot, else the box itself; s.mu is held.
func (s *session) spawnerFor(language, name string) interp.Spawner {
	ids, ok := s.box.(processCounter)
	if !ok {
		return s.box
	}
	sp := &idSpawner{box: s.box, ids: ids, language: language, name: name}
	if s.interpProcs == nil {
		s.interpProcs = map[string]*idSpawner{}
	}
	s.interpProcs[interpKey(language, name)] = sp
	return sp
}

// interpOptions are the options of every persistent interpreter of a
// session of spec sp.
func interpOptions(sp spec.Spec) []interp.Option {
	return []interp.Option{interp.WithCPUs(sp.Limits.CPUs), interp.WithRoot(sp.Root.Dir)}
}

// interpreterProcsLocked lists s's interpreters whose process ID is
// known, for a memory snapshot; s.mu is held.
func (s *session) interpreterProcsLocked() []state.Interpreter {
	var out []state.Interpreter
	for key := range s.interps {
		sp := s.interpProcs[key]
		if sp == nil || sp.id.Load() == 0 {
			continue
		}
		out = append(out, state.Interpreter{Language: sp.language, Name: sp.name, Process: sp.id.Load()})
	}
	return out
}

// memorySaved is what a memory snapshot kept: the size of the box's
// saved memory (0: none, the snapshot is of files only) and the
// interpreters to adopt at the restore; ended says the save ended the
// box, kept or not, so the snapshot is all that is left of the session.
type memorySaved struct {
	bytes   int64
	interps []state.Interpreter
	ended   bool
}

// saveMemory saves paused s's box whole beside the snapshot p, whose
// files are committed, where its backend can; what it cannot save
// leaves a snapshot of files only, said in the server's log, never a
// failed snapshot. The box is resumed for the save, which cuts its
// agent's stream (a frozen agent could not answer) and pauses it again
// itself; it ends with the save, or, refused before it (ErrCannotSave,
// or too little room on the disk for its image), is paused again. Execs
// and file calls stay out meanwhile (s is paused, pauseMu held, its
// files being copied), and s's watcher takes the box's end for the
// save's, not a death, until the snapshot is recorded or has failed
// (beginSave). ctx is capture's, which s's end cancels.
func (m *Manager) saveMemory(ctx context.Context, s *session, p *snapshot.Pending) memorySaved {
	mb, ok := m.backend.(MemoryBackend)
	if !ok {
		return memorySaved{}
	}
	filesOnly := func(why string, err error, ended bool) memorySaved {
		m.cfg.Logger.Warn("the snapshot keeps the session's files only", "session", s.id, "why", why, "err", err)
		return memorySaved{ended: ended}
	}
	if m.cfg.FilesOnlySnapshots {
		m.cfg.Logger.Info("the snapshot keeps the session's files only", "session", s.id, "why", errFilesOnly)
		return memorySaved{}
	}
	if err := mb.SavesMemory(s.spec); err != nil {
		m.cfg.Logger.Info("the snapshot keeps the session's files only", "session", s.id, "why", err)
		return memorySaved{}
	}
	if err := m.cfg.Snapshots.Room(memoryImageBytes(s.spec.Limits)); err != nil {
		return filesOnly("no room on the state directory's disk for the box's image", err, false)
	}
	s.mu.Lock()
	interps := s.interpreterProcsLocked()
	s.mu.Unlock()
	if err := s.box.Resume(ctx); err != nil {
		return filesOnly("resuming the box for its save failed", err, false)
	}
	if err := mb.SaveMemory(ctx, s.box, p.MemoryPath()); err != nil {
		refused := errors.Is(err, ErrCannotSave)
		if refused {
			if perr := s.box.Pause(ctx); perr != nil {
				m.cfg.Logger.Warn("pausing a box again after its save was refused", "session", s.id, "err", perr)
			}
		}
		if rerr := os.RemoveAll(p.MemoryPath()); rerr != nil {
			m.cfg.Logger.Warn("removing a failed save's image", "session", s.id, "err", rerr)
		}
		return filesOnly("saving the box failed", err, !refused)
	}
	step("memory")
	n, err := dirBytes(p.MemoryPath())
	if err == nil {
		err = p.CommitMemory()
	} else if rerr := os.RemoveAll(p.MemoryPath()); rerr != nil {
		m.cfg.Logger.Warn("removing an unmeasured memory image", "session", s.id, "err", rerr)
	}
	if err != nil {
		return filesOnly("keeping the saved box failed", err, true)
	}
	step("memory committed")
	return memorySaved{bytes: max(n, 1), interps: interps, ended: true}
}

// memoryImageBytes is about what a box of limits l's saved image takes
// on disk at most: its memory and a copy of its scratch.
func memoryImageBytes(l spec.Limits) int64 { return l.MemoryBytes + l.DiskBytes }

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		return nil
	})
	return n, err
}

// beginSave marks s's box as being saved for a snapshot, until the
// returned end: its box ending meanwhile is the save's doing, which the
// snapshot, once recorded, closes; should it fail, the watcher then
// buries s as dead.
func (s *session) beginSave() (end func()) {
	done := make(chan struct{})
	s.mu.Lock()
	s.saving = done
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.saving = nil
		s.mu.Unlock()
		close(done)
	}
}

// awaitSave waits for a save of s's box under way, if any, to end.
func (s *session) awaitSave() {
	s.mu.Lock()
	c := s.saving
	s.mu.Unlock()
	if c != nil {
		<-c
	}
}

// restoreMemory starts a box of spc from snapshot name's saved memory, or
// says why not: nil, nil when the snapshot has none (by s's record,
// which charged it, and on disk).
func (m *Manager) restoreMemory(ctx context.Context, s *session, spc spec.Spec, name string) (Box, error) {
	mb, ok := m.backend.(MemoryBackend)
	s.mu.Lock()
	recorded := s.snapMemory > 0
	s.mu.Unlock()
	dir := m.cfg.Snapshots.MemoryPath(name)
	if !recorded || dir == "" {
		return nil, nil
	}
	if !ok {
		return nil, fmt.Errorf("%w: backend %s cannot restore a saved sandbox", ErrUnsupported, m.backend.Name())
	}
	ctx, release := s.stopOnEnd(ctx)
	defer release()
	return m.restoreSlotted(ctx, mb, spc, dir)
}

// restoreSlotted restores a box of spc from the saved memory in dir
// holding one of the server's copy slots (see maxCopies): runsc reads
// the whole image and copies the scratch, disk I/O as heavy as a copy
// of files. A box whose memory goes on loading after RestoreMemory
// returned (memoryLoader) keeps the slot until that load is over, so
// no more images are read at once than there are slots, while its
// resume or fork answers at once.
func (m *Manager) restoreSlotted(ctx context.Context, mb MemoryBackend, spc spec.Spec, dir string) (Box, error) {
	done, err := m.copySlot(ctx)
	if err != nil {
		return nil, fmt.Errorf("restoring a saved sandbox: %w", err)
	}
	box, err := mb.RestoreMemory(ctx, spc, dir)
	if err != nil {
		done()
		return nil, err
	}
	ml, ok := mb.(memoryLoader)
	if !ok {
		done()
		return box, nil
	}
	loaded := ml.Loaded(box)
	go func() {
		<-loaded
		done()
	}()
	return box, nil
}

// memoryLoader is a MemoryBackend whose restored box may read its saved
// memory after RestoreMemory returned (gVisor's background restore).
type memoryLoader interface {
	// Loaded is closed once box's memory has loaded, its load has failed
	// or the backend's bound on the load has passed; at once for a box
	// that loads nothing more.
	Loaded(box Box) <-chan struct{}
}

// adoptInterpreters takes over, in box restored from a memory snapshot,
// the interpreters recs names whose processes still run, as s's; one that
// ended before the save, or cannot be adopted, starts afresh on its next
// run. What else still runs (a command a front end spawned) is no
// session's: it runs on, unread, within the box's limits until the
// session ends.
func (m *Manager) adoptInterpreters(sid string, box Box, spc spec.Spec, recs []state.Interpreter) (map[string]interp.Interpreter, map[string]*idSpawner) {
	defer m.dropUnadopted(sid, box)
	ad, ok := box.(liveAdopter)
	ids, counted := box.(processCounter)
	if !ok || !counted || len(recs) == 0 {
		return nil, nil
	}
	live := ad.Live()
	interps, procs := map[string]interp.Interpreter{}, map[string]*idSpawner{}
	for _, r := range recs {
		if _, running := live[r.Process]; !running {
			continue
		}
		sp := &idSpawner{box: box, ids: ids, language: r.Language, name: r.Name}
		in, err := interp.Adopt(r.Language, sp, ad, r.Process, box.Env(), interpOptions(spc)...)
		if err != nil {
			m.cfg.Logger.Warn("adopting a restored interpreter; it starts afresh", "session", sid, "language", r.Language, "name", r.Name, "err", err)
			continue
		}
		sp.id.Store(r.Process)
		key := interpKey(r.Language, r.Name)
		interps[key], procs[key] = in, sp
	}
	return interps, procs
}

// dropUnadopted ends every process a restored box still lists once the
// interpreters are adopted: nothing on the host holds them, so they would
// run on with their memory, their output unread (and, in a fork,
// unreseeded) until the session ends. A refusal is logged: the process
// then runs until the session ends, as before.
func (m *Manager) dropUnadopted(sid string, box Box) {
	ad, listed := box.(liveAdopter)
	dr, drops := box.(liveDropper)
	if !listed || !drops {
		return
	}
	for id := range ad.Live() {
		if err := dr.DropLive(id); err != nil {
			m.cfg.Logger.Warn("ending a restored process nobody adopts", "session", sid, "process", id, "err", err)
		}
	}
}

// reseedCode is, by language, code that gives a restored copy of an
// interpreter random state of its own, binding no name of the user's:
// Python's random module, OpenSSL's generator behind ssl (ssl.RAND_add
// makes OpenSSL 3 reseed its DRBGs), NumPy's global generator and
// tempfile's name sequence, where the code imported them, from
// os.urandom; bash's $RANDOM. What it does not reach (other generators,
// a bundled OpenSSL, the hash seed) docs/sessions.md lists. JavaScript has none: V8's Math.random and
// Node's crypto (OpenSSL's generator, which it gives no way to reseed)
// cannot be reseeded from the code, so a copy does not keep a restored
// JavaScript interpreter (see reseed).
var reseedCode = map[string]string{
	"python": "if 1:\n    (lambda m, u: (m.get('random') and m['random'].seed(), m.get('ssl') and m['ssl'].RAND_add(u(48), 48.0), m.get('numpy.random') and m['numpy.random'].seed(), m.get('tempfile') and setattr(m['tempfile'], '_name_sequence', None)))(__import__('sys').modules, __import__('os').urandom)\n",
	"bash":   "if [ -n \"$SRANDOM\" ]; then RANDOM=$SRANDOM; else RANDOM=$(od -An -N2 -tu2 /dev/urandom); fi",
}

// reseed gives each interpreter of a box restored as a copy (a fork) its
// own random state: every copy starts with the same memory, so each
// would draw the same numbers, and OpenSSL's the same keys. An
// interpreter whose language has no reseedCode, or whose reseed failed,
// is closed and dropped from interps and procs: its next run starts a
// fresh process, its variables lost, rather than one that repeats
// another copy's secrets.
func (m *Manager) reseed(ctx context.Context, sid string, interps map[string]interp.Interpreter, procs map[string]*idSpawner) {
	for key, in := range interps {
		code, ok := reseedCode[procs[key].language]
		if ok {
			o, err := in.Run(ctx, code, nil, nil)
			if err == nil && o.Exception == nil && o.ExitCode == 0 {
				continue
			}
			m.cfg.Logger.Warn("reseeding a restored interpreter failed; it starts afresh", "session", sid, "interpreter", key, "err", err, "exit", o.ExitCode)
		}
		if err := in.Close(); err != nil {
			m.cfg.Logger.Warn("closing a restored interpreter that cannot be reseeded", "session", sid, "interpreter", key, "err", err)
		}
		delete(interps, key)
		delete(procs, key)
	}
}

// validInterpreters checks a record's memory interpreters: known
// languages, valid names, each once, at most a session's worth.
func validInterpreters(recs []state.Interpreter) error {
	if len(recs) > MaxNamedInterpreters+len(interp.Languages()) {
		return fmt.Errorf("%d interpreters, more than a session has", len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		key := interpKey(r.Language, r.Name)
		switch {
		case !interp.Known(r.Language):
			return fmt.Errorf("interpreter language %q is unknown", r.Language)
		case validInterpreterName(r.Name) != nil:
			return fmt.Errorf("interpreter name %q is not valid", r.Name)
		case r.Process == 0 || seen[key]:
			return fmt.Errorf("interpreter %s is listed twice or without a process", key)
		}
		seen[key] = true
	}
	return nil
}
