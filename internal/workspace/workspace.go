// Package workspace is the host's access to a running sandbox's /workspace:
// list, stat, read, write, mkdir and remove, for the HTTP API.
//
// The sandbox is hostile and its /workspace is its own: it can plant
// symbolic links (to /etc/shadow, to another sandbox's /proc/<pid>/root),
// hard links, FIFOs and device nodes, and rename things while the host
// works. So a Dir opens the workspace once and resolves every path below
// that descriptor with openat2(2) and RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS,
// RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV: the kernel refuses a symbolic
// link in any component and any way out, in the same call that opens the
// file, so there is no window between a check and a use. Directory changes
// (mkdirat, unlinkat, renameat) act on a parent descriptor opened that way
// and one plain final name.
//
// Every operation also runs with the file identity of the sandbox user (its
// fsuid, fsgid and no supplementary groups, on a thread of its own), so the
// host reads and writes exactly what the sandbox user could, never what
// only root could, and what it creates belongs to the sandbox user.
package workspace

import (
	"io/fs"
	"time"
)

// Limits bound what one operation may cost the host. A zero field takes
// its default.
type Limits struct {
	// MaxFileBytes is the largest file Read returns and Write accepts
	// (default 64 MiB), so one request cannot fill the host's memory or
	// the sandbox's disk.
	MaxFileBytes int64
	// MaxEntries is the most entries List returns (default 10000), so a
	// directory of millions of files costs one bounded answer.
	MaxEntries int
	// ReadOnly refuses Write, Mkdir and Remove with ErrReadOnly: the files
	// of a session that no longer runs are only to be fetched.
	ReadOnly bool
}

// Defaults of Limits.
const (
	DefaultMaxFileBytes int64 = 64 << 20
	DefaultMaxEntries         = 10000
)

// withDefaults fills the zero (or negative) fields of l.
func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// TempPrefix begins the temporary name Write gives a file until it is
// complete and renamed into place, so that watchers of the workspace can
// leave those names out.
const TempPrefix = ".warden-upload-"

// Entry types, as Entry.Type spells them.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// Entry describes one name in the workspace as lstat(2) sees it: a symbolic
// link is reported as itself, never as what it points to.
type Entry struct {
	// Name is the last element of Path ("." for the workspace itself).
	Name string `json:"name"`
	// Path is relative to /workspace, in slash form ("." for /workspace).
	Path string `json:"path"`
	// Type is TypeFile, TypeDir, TypeSymlink or TypeOther (FIFOs, sockets,
	// device nodes).
	Type string `json:"type"`
	// Size is the size in bytes (for a symbolic link, of its target text).
	Size int64 `json:"size"`
	// Mode holds the permission bits only.
	Mode fs.FileMode `json:"mode"`
	// ModTime is the last modification time.
	ModTime time.Time `json:"mtime"`
	// UID and GID own the file on the host; API-specific views name them
	// (the sandbox user, root, or the number), so they stay out of JSON.
	UID uint32 `json:"-"`
	GID uint32 `json:"-"`
	// LinkTarget is what a symbolic link says, for display only: Warden
	// never follows it.
	LinkTarget string `json:"link_target,omitempty"`
}
