package workspace

import (
	"errors"
	"fmt"
)

// The errors every operation's error wraps, so that callers (the HTTP API)
// can answer with the right status without parsing messages. Permission
// errors wrap ErrDenied and the errno, and so match fs.ErrPermission too.
var (
	// ErrNotFound: the path, or one of its directories, does not exist.
	// ErrReadOnly: the workspace may be read, not changed.
	ErrReadOnly = errors.New("read-only")
	ErrNotFound = errors.New("not found")
	// ErrExists: the path exists where it must not (Mkdir over a file).
	ErrExists = errors.New("already exists")
	// ErrIsDir: a file operation met a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrNotDir: a directory operation, or a path's directory, met a
	// non-directory.
	ErrNotDir = errors.New("not a directory")
	// ErrNotEmpty: removing a non-empty directory without recursive.
	ErrNotEmpty = errors.New("directory not empty")
	// ErrDenied: the sandbox user may not do this to the path (EACCES,
	// EPERM). Unlike fs.ErrPermission, which any *os.PathError can match,
	// only this package's errors wrap it, so a caller that shows its
	// message shows a workspace path, never a host one.
	ErrDenied = errors.New("permission denied")
	// ErrBadPath: the path is not a plain relative path inside /workspace.
	ErrBadPath = errors.New("bad path")
	// ErrBadMode: a file mode other than permission bits.
	ErrBadMode = errors.New("bad mode")
	// ErrTooLarge: a file over Limits.MaxFileBytes, or a full workspace.
	ErrTooLarge = errors.New("too large")
	// ErrNoSpace: the workspace's disk is full (ENOSPC, EDQUOT); such an
	// error is ErrTooLarge too.
	ErrNoSpace = errors.New("no space left")
	// ErrTruncated: List stopped at Limits.MaxEntries; the entries it
	// returns with this error are valid.
	ErrTruncated = errors.New("listing truncated")
	// ErrNotRegular: Read met a FIFO, socket, device or directory, which
	// could block the host or have side effects when opened.
	ErrNotRegular = errors.New("not a regular file")
	// ErrHardLink: Read met a file with several names. One of them may be
	// a file outside the workspace that the sandbox linked in (judge0
	// CVE-2024-28189), so Warden reads none of them.
	ErrHardLink = errors.New("hard link")
	// ErrBusy: Read met a file on which a process in the sandbox holds a
	// lease (fcntl F_SETLEASE). Opening it would wait for the lease's
	// break time (45 s by default) while holding a copy slot, so Warden
	// opens without waiting and refuses the file instead. The seccomp
	// filter refuses F_SETLEASE too; this is the second layer, for a
	// filter that lets one through.
	ErrBusy = errors.New("file busy")
	// ErrLink: a path component is a symbolic link, or the path would
	// leave the workspace (CVE-2024-28185). Warden never follows links
	// from the host.
	ErrLink = errors.New("symbolic link")
)

// pathError is a one-line message naming the path, which wraps the
// sentinels (or errno) it is an instance of.
type pathError struct {
	msg   string
	kinds []error
}

func (e *pathError) Error() string   { return e.msg }
func (e *pathError) Unwrap() []error { return e.kinds }

// errorf returns a pathError of kind with a formatted message.
func errorf(kind error, format string, args ...any) error {
	return &pathError{msg: fmt.Sprintf(format, args...), kinds: []error{kind}}
}
