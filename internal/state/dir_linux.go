package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is an open state directory, locked for one server: two servers
// sharing one would each take the other's sessions for dead ones.
type Dir struct {
	path string
	lock *os.File
}

// Layout of a state directory.
const (
	lockName       = "lock"
	sessionsDir    = "sessions"
	workspacesDir  = "workspaces"
	recordSuffix   = ".json"
	corruptSuffix  = ".corrupt"
	maxRecordBytes = 64 << 10
)

// Open makes (if needed), locks and checks the state directory at path.
// A directory that cannot be written fails here, at start, with the
// reason and the fix rather than at the first session.
func Open(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("state directory %q is not an absolute path", path)
	}
	for _, d := range []string{path, filepath.Join(path, sessionsDir), filepath.Join(path, workspacesDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, storageError(path, "making "+d, err)
		}
	}
	real, err := secure(path)
	if err != nil {
		return nil, err
	}
	d := &Dir{path: real}
	if err := d.takeLock(); err != nil {
		return nil, err
	}
	if err := d.probe(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// takeLock holds an exclusive flock on the lock file for the life of the
// process (the kernel drops it when the process dies, however it dies),
// and writes the holder's pid there for the message a second server gets.
func (d *Dir) takeLock() error {
	p := filepath.Join(d.path, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return storageError(d.path, "opening "+p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("state directory %s is in use by another warden (pid %s): give each server its own --state-dir", d.path, strings.TrimSpace(string(holder)))
		}
		return fmt.Errorf("locking state directory %s: %w", d.path, err)
	}
	d.lock = f
	if err := f.Truncate(0); err != nil {
		d.Close()
		return storageError(d.path, "writing "+p, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		d.Close()
		return storageError(d.path, "writing "+p, err)
	}
	return nil
}

// probe writes, reads back and removes a small file, the way a record is
// written, so a full or read-only directory is found at start.
func (d *Dir) probe() error {
	p := filepath.Join(d.path, ".probe")
	want := bytes.Repeat([]byte("warden state probe\n"), 64)
	if err := writeFile(p, want, false); err != nil {
		return storageError(d.path, "writing a test file", err)
	}
	got, err := os.ReadFile(p)
	rerr := os.Remove(p)
	if err != nil || !bytes.Equal(got, want) {
		return storageError(d.path, "reading back a test file", errors.Join(err, unix.EIO, rerr))
	}
	if rerr != nil {
		return storageError(d.path, "removing a test file", rerr)
	}
	return nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Close releases the lock; records and workspaces stay.
func (d *Dir) Close() error {
	if d.lock == nil {
		return nil
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

// writeFile writes b to a temporary file beside p and renames it over p,
// so a reader (or the next server, after a crash of the server) sees all
// or nothing; with sync it fsyncs the file before the rename and the
// directory after, so that holds after a crash of the host too.
func writeFile(p string, b []byte, sync bool) error {
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	if sync {
		return SyncDir(filepath.Dir(p))
	}
	return nil
}

// SaveSession writes (or replaces) s's record, as a crash of the server
// keeps it (no fsync: a create stays about a millisecond).
func (d *Dir) SaveSession(s Session) error {
	return d.saveSession(s, false)
}

// SaveSessionSync is SaveSession made durable (fsync'd, and its
// directory), for a change a crash of the host must not undo: a session
// snapshotted to disk, or resumed from its snapshot.
func (d *Dir) SaveSessionSync(s Session) error {
	return d.saveSession(s, true)
}

func (d *Dir) saveSession(s Session, sync bool) error {
	if !validName(s.ID) {
		return fmt.Errorf("saving session %q: not a session id", s.ID)
	}
	s.Version = Version
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("saving session %s: %w", s.ID, err)
	}
	if err := writeFile(d.recordPath(s.ID), append(b, '\n'), sync); err != nil {
		return storageError(d.path, "saving session "+s.ID, err)
	}
	return nil
}

// RemoveSession deletes id's record; a missing one is no error.
func (d *Dir) RemoveSession(id string) error {
	if !validName(id) {
		return fmt.Errorf("removing session %q: not a session id", id)
	}
	if err := os.Remove(d.recordPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storageError(d.path, "removing session "+id, err)
	}
	return nil
}

func (d *Dir) recordPath(id string) string {
	return filepath.Join(d.path, sessionsDir, id+recordSuffix)
}

// Sessions reads every record. A record that cannot be read or parsed is
// renamed aside (…json.corrupt, kept for a person to look at) and named
// in the returned error; the others are still returned.
func (d *Dir) Sessions() ([]Session, error) {
	dir := filepath.Join(d.path, sessionsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var list []Session
	var errs []error
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp"):
			_ = os.Remove(filepath.Join(dir, name)) // a write the crash cut short
			continue
		case !strings.HasSuffix(name, recordSuffix):
			continue
		}
		s, err := readRecord(filepath.Join(dir, name))
		if err != nil {
			if rerr := os.Rename(filepath.Join(dir, name), filepath.Join(dir, name+corruptSuffix)); rerr != nil {
				err = errors.Join(err, fmt.Errorf("moving it aside: %w", rerr))
			}
			errs = append(errs, fmt.Errorf("session record %s (moved aside to %s%s): %w", name, name, corruptSuffix, err))
			continue
		}
		list = append(list, s)
	}
	return list, errors.Join(errs...)
}

func readRecord(p string) (Session, error) {
	var s Session
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return s, err
	}
	defer f.Close()
	dec := json.NewDecoder(&limitedReader{f: f, left: maxRecordBytes})
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("parsing: %w", err)
	}
	switch {
	case s.Version != Version:
		return s, fmt.Errorf("format version %d, this warden reads %d", s.Version, Version)
	case !validName(s.ID) || s.ID+recordSuffix != filepath.Base(p):
		return s, fmt.Errorf("id %q does not match the file name", s.ID)
	case s.Workspace != "" && !validName(s.Workspace):
		return s, fmt.Errorf("workspace name %q is not valid", s.Workspace)
	case s.Snapshot != "" && !validName(s.Snapshot):
		return s, fmt.Errorf("snapshot name %q is not valid", s.Snapshot)
	}
	return s, nil
}

// limitedReader fails past left bytes instead of pretending EOF, so an
// oversized record is reported rather than half-parsed.
type limitedReader struct {
	f    *os.File
	left int64
}

func (r *limitedReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, fmt.Errorf("record is larger than %d bytes", maxRecordBytes)
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.f.Read(p)
	r.left -= int64(n)
	return n, err
}

// validName accepts the names Warden makes (session ids, workspace
// names): URL-safe characters only, so a name read back from a record
// can never walk out of the state directory.
func validName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
