// Package snapshot keeps sessions' files on disk while their sandboxes
// are closed: a snapshot is a plain directory tree under the state
// directory (<state-dir>/snapshots/<name>), written from a session's
// /workspace and restored into a fresh sandbox's, so a session can give
// back its memory and come back later, also after the server restarts,
// or be copied into several new sessions (fork).
//
// A snapshot appears all at once or not at all: it is written into a
// temporary directory (".tmp-<name>"), every file and directory is
// fsync'd, and only then is it renamed to its name and the parent
// fsync'd. A crash leaves either no snapshot or a whole one; Sweep
// removes what a crash left half made and snapshots no session names.
//
// The workspace is the sandbox's and hostile: it is read and written
// only through workspace.Dir, which refuses symbolic links and every way
// out, acts as the sandbox user, and reads only regular files of one
// name. Symbolic links, hard-linked files, FIFOs, sockets and devices are
// skipped and counted (Stats.Skipped), never copied; only files'
// permission bits are kept (no setuid, no owners: files belong to the
// sandbox user that restores them; directories are made anew, with
// workspace.Dir's default mode). Sizes and counts are bounded by Limits.
//
// Every copy is a whole copy, made in the kernel (workspace.CopyN:
// sendfile(2), one copy of each byte from page cache to page cache). A
// fork copies a snapshot into each new session's workspace, and every
// backend's workspace is a tmpfs of its own, sized by the session's
// --disk: tmpfs has no reflink (FICLONE) to share the bytes, and an
// overlay (the snapshot a read-only lower layer, each fork's workspace the
// upper) would bound by --disk only what a fork changes, not what it
// holds (a fork could hold --disk of its own beside the snapshot's), keep
// the snapshot on the state directory's disk as long as any fork lives,
// and need each backend to mount its workspace anew (gVisor's gofer, Docker's
// bind mount, microvm's 9p share). What the kernel's copy saves is
// measured by BenchmarkSnapshotFiles in internal/sandbox; docs/sessions.md
// (Cost) has the figures, the one place they are kept. fsync is skipped
// only for a snapshot no record names (BeginTemporary), which a crash
// leaves for Sweep.
package snapshot

import (
	"errors"
	"fmt"
)

// Limits bound what one snapshot may hold, so a sandbox cannot make the
// host copy more than its own disk limit allows.
type Limits struct {
	// MaxBytes bounds the bytes of all files together (the session's
	// --disk limit).
	MaxBytes int64
	// MaxEntries bounds files and directories together (the session's
	// inode limit).
	MaxEntries int
}

// MaxDepth bounds how deep a snapshot's directories may nest, so a
// hostile tree cannot exhaust the host's stack or path lengths.
const MaxDepth = 128

// Stats say what a snapshot holds, or what a restore copied.
type Stats struct {
	// Files and Dirs count what was copied; Bytes is the files' size.
	Files, Dirs int
	Bytes       int64
	// Skipped counts entries that are not copied: symbolic links, files
	// with several names, FIFOs, sockets, devices and files the sandbox
	// user may not read.
	Skipped int
}

// EntryCost is what each file and directory of a snapshot is charged
// on top of its bytes: at least a block of the host's disk and an inode,
// which empty files and directories take too.
const EntryCost = 4096

// Charge is what a snapshot holding st costs its owner's budget: its
// bytes plus EntryCost for each entry, so a tree of empty files cannot
// fill the state directory's inodes for free.
func (st Stats) Charge() int64 {
	return st.Bytes + int64(st.Files+st.Dirs)*EntryCost
}

// ErrTooLarge marks a workspace over Limits: nothing was kept.
var ErrTooLarge = errors.New("snapshot too large")

func (st *Stats) add(lim Limits, bytes int64) error {
	if lim.MaxEntries > 0 && st.Files+st.Dirs >= lim.MaxEntries {
		return fmt.Errorf("%w: the workspace holds more than %d files and directories (the session's inode limit)", ErrTooLarge, lim.MaxEntries)
	}
	if lim.MaxBytes > 0 && st.Bytes+bytes > lim.MaxBytes {
		return fmt.Errorf("%w: the workspace's files are over %d bytes (the session's disk limit)", ErrTooLarge, lim.MaxBytes)
	}
	st.Bytes += bytes
	return nil
}
