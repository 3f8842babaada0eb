// Package state is the small directory a Warden server keeps so that its
// sessions outlive a crash of the server: one record per session (its id,
// owner, limits, expiry and workspace) and each session's workspace, a
// tmpfs mounted on the host rather than inside the sandbox. When the
// server dies without cleaning up, the next one finds the records, reports
// those sessions as dead through the API, and still serves their files.
//
// Records are written to a temporary file and renamed into place. Most
// are not fsync'd: they guard against the server dying, which leaves the
// page cache intact, not against the host dying, which also empties every
// workspace tmpfs. The records of a snapshot's transitions are
// (SaveSessionSync): a snapshot on disk outlives the host, so the record
// that names it must too.
package state

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Version is the record format; a record of another version is reported
// and moved aside (see Sessions), and its workspace is kept.
const Version = 1

// ErrStorage marks a state directory that cannot be written: full, read
// only, or failing. The server answers it as 507 and keeps serving what
// needs no new state.
var ErrStorage = errors.New("state directory unusable")

// Session is one session's record.
type Session struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Owner is the tenant id of the API key that made it (a digest, never
	// the key).
	Owner   string `json:"owner"`
	Backend string `json:"backend"`
	// Workspace names the session's persistent workspace; empty when the
	// backend keeps /workspace inside the sandbox, where a crash loses it.
	Workspace string `json:"workspace,omitempty"`
	// ServerPID is the pid of the server that made the session.
	ServerPID   int                `json:"server_pid"`
	CreatedAt   time.Time          `json:"created_at"`
	ExpiresAt   time.Time          `json:"expires_at"`
	IdleTimeout time.Duration      `json:"idle_timeout_ns"`
	Limits      spec.Limits        `json:"limits"`
	Network     spec.NetworkPolicy `json:"network"`
	// DiedAt and Reason are set once the session's sandbox has died.
	DiedAt time.Time `json:"died_at,omitzero"`
	Reason string    `json:"reason,omitempty"`
	// Template names the template the session ran on ("": the host's
	// root).
	Template string `json:"template,omitempty"`
	// TemplateDigest is that template's digest when the session started:
	// warden template commit refuses a base replaced under its name since.
	TemplateDigest string `json:"template_digest,omitempty"`
	// Paused says the session was paused (its box frozen) when the record
	// was written; a server that finds it after a crash reports the
	// session dead, as its box died with the server. AutoPause is the
	// session's option to pause at its idle timeout.
	Paused       bool `json:"paused,omitempty"`
	AutoPause    bool `json:"auto_pause,omitempty"`
	AutoSnapshot bool `json:"auto_snapshot,omitempty"`
	// Env is a snapshotted session's environment (KEY=VALUE), which it
	// starts with when resumed, maybe by another server; empty in every
	// other state, as it may hold keys. It sits at rest in this record,
	// mode 0600, until the session is resumed or ends.
	Env []string `json:"env,omitempty"`
	// Snapshot names the session's snapshot (see package snapshot) once
	// it is snapshotted: its box is closed and its files are there. It
	// is written only after the snapshot is whole, so a record naming
	// one names a complete snapshot.
	Snapshot      string    `json:"snapshot,omitempty"`
	SnapshottedAt time.Time `json:"snapshotted_at,omitzero"`
	// SnapshotBytes, SnapshotFiles, SnapshotDirs and SnapshotSkipped
	// describe it; the next server charges the owner's budget from them
	// (bytes plus a cost per file and directory), so the directories are
	// kept too.
	SnapshotBytes   int64 `json:"snapshot_bytes,omitempty"`
	SnapshotFiles   int   `json:"snapshot_files,omitempty"`
	SnapshotDirs    int   `json:"snapshot_dirs,omitempty"`
	SnapshotSkipped int   `json:"snapshot_skipped,omitempty"`
	// SnapshotMemoryBytes is the size of the box's saved memory kept
	// beside the snapshot (gVisor over the stream transport); 0 for a
	// snapshot of files only. The owner's budget is charged it too.
	SnapshotMemoryBytes int64 `json:"snapshot_memory_bytes,omitempty"`
	// SnapshotInterpreters are the session's persistent interpreters at
	// a memory snapshot, each with the process that the restored box
	// still runs, so a resume takes them over (interp.Adopt).
	SnapshotInterpreters []Interpreter `json:"snapshot_interpreters,omitempty"`
}

// Interpreter is one persistent interpreter of a memory snapshot: its
// language, its name ("" for the default one) and the ID the sandbox's
// agent gave its process.
type Interpreter struct {
	Language string `json:"language"`
	Name     string `json:"name,omitempty"`
	Process  uint64 `json:"process"`
}

// storageError explains an error writing in the state directory at dir:
// a full disk or a read-only mount gets a message that says what to do,
// and ErrStorage so callers can answer it without matching text.
func storageError(dir, doing string, err error) error {
	var why string
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		why = "is full: free some space there or choose another with --state-dir"
	case errors.Is(err, syscall.EROFS):
		why = "is read-only: remount it read-write or choose another with --state-dir"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		why = "is not writable by this user: fix its permissions or choose another with --state-dir"
	case errors.Is(err, syscall.EIO):
		why = "has an I/O error: check the disk or choose another with --state-dir"
	default:
		return fmt.Errorf("%s in state directory %s: %w", doing, dir, err)
	}
	return fmt.Errorf("%w: %s: %s %s (%w)", ErrStorage, doing, dir, why, err)
}

// SyncDir fsyncs directory p, so a rename or a new entry in it reaches
// the disk: the one way records and snapshots are made durable.
func SyncDir(p string) error {
	d, err := os.Open(p)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
