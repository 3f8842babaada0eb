package workspace

import (
	"io"
	"io/fs"
)

// Files is the method set the file API (HTTP, MCP, E2B) uses on a
// session's /workspace. *Dir implements it for a workspace this host can
// open; a box whose files are elsewhere (a Kubernetes Pod) implements it
// through its agent, which runs the same Dir code on its own side (see
// internal/agent's RemoteFiles). Both return errors wrapping the same
// sentinels, so every front end answers alike.
type Files interface {
	// Stat, List, Read, Write, Mkdir, Remove and Rename are Dir's.
	Stat(p string) (Entry, error)
	List(p string) ([]Entry, error)
	Read(p string) (io.ReadCloser, Entry, error)
	Write(p string, r io.Reader, mode fs.FileMode) (Entry, error)
	Mkdir(p string) (Entry, error)
	Remove(p string, recursive bool) error
	Rename(src, dst string) (Entry, error)
	// AddWatch adds directory p to the caller's inotify instance; files
	// that are not on this host refuse it with errors.ErrUnsupported.
	AddWatch(inotifyFD int, p string, mask uint32) (int, error)
	// Owner is the uid and gid the files are accessed as, in the ids
	// Entry.UID and Entry.GID use; -1 for both when they cannot be
	// known (a box's agent that did not answer).
	Owner() (uid, gid int)
	// Close releases what the Files hold; calls after it fail.
	Close() error
}

var _ Files = (*Dir)(nil)
