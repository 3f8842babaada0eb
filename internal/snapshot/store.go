package snapshot

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/warden-sandbox/warden/internal/state"
)

// tmpPrefix begins the name of a snapshot being written.
const tmpPrefix = ".tmp-"

// memorySuffix ends the name of the directory beside a snapshot that
// holds its box's memory, where the backend can save it (MemoryPath):
// the snapshot's own directory is the workspace's tree, whose names are
// the sandbox's, so the memory cannot go inside it.
const memorySuffix = ".mem"

// Store is the directory that holds snapshots, one subdirectory each.
type Store struct {
	path string
}

// Open makes (if needed) the private directory path and returns the
// Store kept there.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("making snapshot directory %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return nil, fmt.Errorf("making snapshot directory %s private: %w", path, err)
	}
	return &Store{path: path}, nil
}

// Path is where the Store keeps its snapshots.
func (s *Store) Path() string { return s.path }

// Pending is a snapshot being written: nobody sees it until Commit.
type Pending struct {
	store *Store
	name  string
	root  *os.Root
	// durable says every file and directory is fsync'd (Begin), so the
	// snapshot outlives a crash of the host once committed.
	durable bool
}

// ReservePercent is how much of the state directory's disk, blocks and
// inodes both, Begin leaves free.
const ReservePercent = 5

// Begin starts a new snapshot under a fresh random name, unless the state
// directory's disk is nearly full (see checkFree).
func (s *Store) Begin() (*Pending, error) { return s.begin(true) }

// BeginTemporary starts a snapshot that no session record will name and
// that is dropped once used (a fork's copy of a session that runs): a
// crash at any point leaves it for Sweep, whole or not, so nothing of it
// is fsync'd, which spares the copy a wait for the disk to write every
// byte. The disk's reserve is checked as for Begin.
func (s *Store) BeginTemporary() (*Pending, error) { return s.begin(false) }

func (s *Store) begin(durable bool) (*Pending, error) {
	if err := s.checkFree(); err != nil {
		return nil, fmt.Errorf("starting a snapshot: %w", err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	p := &Pending{store: s, name: "snap_" + hex.EncodeToString(b[:]), durable: durable}
	tmp := filepath.Join(s.path, tmpPrefix+p.name)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("starting a snapshot: %w", err)
	}
	r, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting a snapshot: %w", err), os.Remove(tmp))
	}
	p.root = r
	return p, nil
}

// Name is the name the snapshot gets once committed.
func (p *Pending) Name() string { return p.name }

// MemoryPath is where the backend saves the box's memory for this
// snapshot (a directory it makes; it must not exist), once the snapshot
// is committed: beside it, placed by CommitMemory and dropped with it.
func (p *Pending) MemoryPath() string {
	return filepath.Join(p.store.path, tmpPrefix+p.name+memorySuffix)
}

// hasMemory says a memory directory was made at MemoryPath.
func (p *Pending) hasMemory() bool {
	fi, err := os.Lstat(p.MemoryPath())
	return err == nil && fi.IsDir()
}

// Commit makes the snapshot's files whole and visible: the tree is
// already fsync'd by Capture; it is renamed into place and the parent
// directory fsync'd, so after Commit a crash of the host keeps it. A
// temporary snapshot is only renamed. The box's memory comes after
// (CommitMemory), so that a failure of the files leaves the box as it
// was, and one of the memory only the memory.
func (p *Pending) Commit() error {
	if err := p.root.Close(); err != nil {
		return errors.Join(fmt.Errorf("committing snapshot %s: %w", p.name, err), p.Abort())
	}
	tmp := filepath.Join(p.store.path, tmpPrefix+p.name)
	if err := p.syncDir(tmp); err != nil {
		return errors.Join(fmt.Errorf("committing snapshot %s: %w", p.name, err), p.Abort())
	}
	if err := os.Rename(tmp, filepath.Join(p.store.path, p.name)); err != nil {
		return errors.Join(fmt.Errorf("committing snapshot %s: %w", p.name, err), p.Abort())
	}
	if err := p.syncDir(p.store.path); err != nil {
		return errors.Join(fmt.Errorf("committing snapshot %s: %w", p.name, err), p.store.Drop(p.name))
	}
	return nil
}

// CommitMemory fsyncs the memory directory the backend made at
// MemoryPath after Commit, renames it beside the snapshot and fsyncs the
// parent. On failure the memory is removed, the snapshot's files kept:
// the snapshot is then one of files only (a crash before the session's
// record leaves both for Sweep).
func (p *Pending) CommitMemory() error {
	if !p.hasMemory() {
		return fmt.Errorf("committing the memory of snapshot %s: the backend made no memory directory", p.name)
	}
	placed := filepath.Join(p.store.path, p.name+memorySuffix)
	err := p.placeMemory(placed)
	if err == nil {
		return nil
	}
	if rerr := errors.Join(os.RemoveAll(p.MemoryPath()), removeIfPlaced(placed, err)); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return fmt.Errorf("committing the memory of snapshot %s: %w", p.name, err)
}

// errPlaced marks a failure after the memory was renamed into place.
var errPlaced = errors.New("after placing it")

func (p *Pending) placeMemory(placed string) error {
	if p.durable {
		if err := syncTree(p.MemoryPath()); err != nil {
			return fmt.Errorf("syncing the memory image: %w", err)
		}
	}
	if err := os.Rename(p.MemoryPath(), placed); err != nil {
		return fmt.Errorf("placing the memory image: %w", err)
	}
	if err := p.syncDir(p.store.path); err != nil {
		return fmt.Errorf("%w: %w", errPlaced, err)
	}
	return nil
}

// removeIfPlaced removes the placed memory directory when err says the
// failure came after its rename; else what is there is not ours.
func removeIfPlaced(placed string, err error) error {
	if !errors.Is(err, errPlaced) {
		return nil
	}
	return os.RemoveAll(placed)
}

// syncDir fsyncs directory dir if p is durable.
func (p *Pending) syncDir(dir string) error {
	if !p.durable {
		return nil
	}
	return state.SyncDir(dir)
}

// syncTree fsyncs every regular file and directory under dir, which the
// backend wrote (its copy of the box's files keeps their names, so
// nothing but regular files and directories is opened, none followed).
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		return errors.Join(f.Sync(), f.Close())
	})
}

// Abort removes what was written of the snapshot, its memory included.
func (p *Pending) Abort() error {
	_ = p.root.Close() // closing twice only says it was closed
	err := errors.Join(os.RemoveAll(filepath.Join(p.store.path, tmpPrefix+p.name)), os.RemoveAll(p.MemoryPath()))
	if err != nil {
		return fmt.Errorf("removing an unfinished snapshot: %w", err)
	}
	return nil
}

// Drop removes snapshot name and its memory; a missing one is no error.
func (s *Store) Drop(name string) error {
	if !validName(name) {
		return fmt.Errorf("removing snapshot %q: not a snapshot name", name)
	}
	// The memory first: a snapshot left without it resumes from its files.
	err := errors.Join(os.RemoveAll(filepath.Join(s.path, name+memorySuffix)), os.RemoveAll(filepath.Join(s.path, name)))
	if err != nil {
		return fmt.Errorf("removing snapshot %s: %w", name, err)
	}
	return nil
}

// MemoryPath is where committed snapshot name keeps its box's memory,
// "" when it has none (a files-only snapshot, or not a snapshot name).
func (s *Store) MemoryPath(name string) string {
	if !validName(name) {
		return ""
	}
	p := filepath.Join(s.path, name+memorySuffix)
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		return ""
	}
	return p
}

// Has says snapshot name exists (committed).
func (s *Store) Has(name string) bool {
	if !validName(name) {
		return false
	}
	st, err := os.Lstat(filepath.Join(s.path, name))
	return err == nil && st.IsDir()
}

// Sweep removes every unfinished snapshot (a crash cut it short) and
// every committed one keep does not name (its session's record was never
// written, or was removed), and says how many it removed.
func (s *Store) Sweep(keep map[string]bool) (int, error) {
	entries, err := os.ReadDir(s.path)
	if err != nil {
		return 0, fmt.Errorf("reading snapshot directory %s: %w", s.path, err)
	}
	var errs []error
	n := 0
	for _, e := range entries {
		name := e.Name()
		if keep[strings.TrimSuffix(name, memorySuffix)] {
			continue
		}
		if !strings.HasPrefix(name, tmpPrefix) && !validName(strings.TrimSuffix(name, memorySuffix)) {
			continue // not one of ours: left for a person to look at
		}
		if err := os.RemoveAll(filepath.Join(s.path, name)); err != nil {
			errs = append(errs, fmt.Errorf("removing leftover snapshot %s: %w", name, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func (s *Store) open(name string) (*os.Root, error) {
	if !validName(name) {
		return nil, fmt.Errorf("opening snapshot %q: not a snapshot name", name)
	}
	r, err := os.OpenRoot(filepath.Join(s.path, name))
	if err != nil {
		return nil, fmt.Errorf("opening snapshot %s: %w", name, err)
	}
	return r, nil
}

// validName accepts the names Begin makes, so a name read back from a
// session record never walks out of the directory.
func validName(name string) bool {
	rest, ok := strings.CutPrefix(name, "snap_")
	if !ok || len(rest) != 24 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}
