package e2b

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/warden-sandbox/warden/internal/e2b/filesystempb"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// e2bUser is the one user E2B's file calls may name: the sandbox user,
// which E2B calls "user". Warden acts as no other (not root).
const e2bUser = "user"

// workspacePath maps an E2B path (absolute, or relative to the home) to
// the absolute path inside the box that workspace.Dir takes, refusing one
// outside the workspace with a message naming the roots Warden exposes.
func workspacePath(p string) (string, error) {
	bp, err := boxPath(p)
	if err != nil {
		return "", kindErrorf(workspace.ErrBadPath, "%v", err)
	}
	if bp != boxHome && !strings.HasPrefix(bp, boxHome+"/") {
		return "", kindErrorf(workspace.ErrBadPath, "path %q is outside the files Warden exposes; give a path under %s (the same directory as %s) or one relative to it",
			p, e2bPath(boxHome), boxHome)
	}
	return bp, nil
}

// checkUser refuses a user other than the sandbox user: Warden reads and
// writes files only as that user, so honouring "root" would be a lie.
func checkUser(name string) error {
	if name == "" || name == e2bUser {
		return nil
	}
	return kindErrorf(workspace.ErrBadPath, "user %q: Warden acts on files only as the sandbox user %q; leave the user option out or give %q",
		name, e2bUser, e2bUser)
}

// kindError is a one-line message that matches kind with errors.Is, so
// the tables below pick its code without the kind's text in the message.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func kindErrorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// owners names the host's file owners as E2B reports them: the sandbox
// user's ids are "user", 0 is "root", anything else its number. When the
// files cannot say whom they act as (Owner reports -1: a box's agent did
// not answer), every id but 0 is named "user", the owner of a box's files
// by default, rather than 4294967295.
type owners struct {
	uid, gid int
}

func ownersOf(dir workspace.Files) owners {
	uid, gid := dir.Owner()
	return owners{uid: uid, gid: gid}
}

func (o owners) name(id uint32, user int) string {
	switch {
	case id == 0:
		return "root"
	case user < 0 || int64(id) == int64(user):
		return e2bUser
	}
	return strconv.FormatUint(uint64(id), 10)
}

// entryInfo is e as envd describes an entry: the path as the SDK names it
// (under /home/user), the permission bits and their ls-style string, the
// owners' names, and for a symbolic link its target made absolute by
// joining it to the link's directory, as text only: the link is never
// followed, so its type stays symlink and its mode the link's own.
func entryInfo(e workspace.Entry, o owners) *filesystempb.EntryInfo {
	bp := path.Join(boxHome, e.Path)
	info := &filesystempb.EntryInfo{
		Name:         validName(path.Base(e2bPath(bp))),
		Type:         fileType(e.Type),
		Path:         validName(e2bPath(bp)),
		Size:         e.Size,
		Mode:         uint32(e.Mode.Perm()),
		Permissions:  permissions(e),
		Owner:        o.name(e.UID, o.uid),
		Group:        o.name(e.GID, o.gid),
		ModifiedTime: timestamppb.New(e.ModTime),
	}
	if e.Type == workspace.TypeSymlink {
		target := e.LinkTarget
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(bp), target)
		}
		target = validName(e2bPath(path.Clean(target)))
		info.SymlinkTarget = &target
	}
	return info
}

// validName is a name or path from the sandbox's files made valid UTF-8,
// which protobuf strings must be: each run of invalid bytes becomes
// U+FFFD. A name the box wrote in another encoding would otherwise fail
// the whole ListDir, Stat or WatchDir with a marshalling error; shown
// this way it is listed, though not addressable by the name shown.
func validName(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

func fileType(t string) filesystempb.FileType {
	switch t {
	case workspace.TypeFile:
		return filesystempb.FileType_FILE_TYPE_FILE
	case workspace.TypeDir:
		return filesystempb.FileType_FILE_TYPE_DIRECTORY
	case workspace.TypeSymlink:
		return filesystempb.FileType_FILE_TYPE_SYMLINK
	}
	return filesystempb.FileType_FILE_TYPE_UNSPECIFIED
}

// permissions is Go's ls-style mode string, which envd reports:
// "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx", "?rw-r--r--" for the rest.
func permissions(e workspace.Entry) string {
	m := e.Mode.Perm()
	switch e.Type {
	case workspace.TypeDir:
		m |= os.ModeDir
	case workspace.TypeSymlink:
		m |= os.ModeSymlink
	case workspace.TypeOther:
		m |= os.ModeIrregular
	}
	return m.String()
}

// fsErrorKinds maps what workspace (and the files API) report to the
// Connect code and the HTTP status of E2B's answers: one table for both,
// first match wins (a full disk is also ErrTooLarge).
var fsErrorKinds = []struct {
	kind   error
	code   connect.Code
	status int
}{
	{workspace.ErrNotFound, connect.CodeNotFound, http.StatusNotFound},
	{workspace.ErrExists, connect.CodeAlreadyExists, http.StatusConflict},
	{workspace.ErrNoSpace, connect.CodeResourceExhausted, http.StatusInsufficientStorage},
	{workspace.ErrTooLarge, connect.CodeFailedPrecondition, http.StatusRequestEntityTooLarge},
	{workspace.ErrTruncated, connect.CodeFailedPrecondition, http.StatusRequestEntityTooLarge},
	{workspace.ErrReadOnly, connect.CodeFailedPrecondition, http.StatusConflict},
	{workspace.ErrNotEmpty, connect.CodeFailedPrecondition, http.StatusConflict},
	{workspace.ErrBusy, connect.CodeFailedPrecondition, http.StatusConflict},
	{workspace.ErrLink, connect.CodeInvalidArgument, http.StatusBadRequest},
	{workspace.ErrBadPath, connect.CodeInvalidArgument, http.StatusBadRequest},
	{workspace.ErrBadMode, connect.CodeInvalidArgument, http.StatusBadRequest},
	{workspace.ErrIsDir, connect.CodeInvalidArgument, http.StatusBadRequest},
	{workspace.ErrNotDir, connect.CodeInvalidArgument, http.StatusBadRequest},
	{workspace.ErrNotRegular, connect.CodeInvalidArgument, http.StatusBadRequest},
	{workspace.ErrHardLink, connect.CodeInvalidArgument, http.StatusBadRequest},
	{errTooMany, connect.CodeResourceExhausted, http.StatusTooManyRequests},
	// What the files cannot do where they are: a watch of a box whose
	// files its agent serves (not on this host), or off Linux. These
	// messages name box paths only.
	{errors.ErrUnsupported, connect.CodeUnimplemented, http.StatusNotImplemented},
	{errEventsLost, connect.CodeDataLoss, http.StatusInternalServerError},
	{errStalled, connect.CodeDeadlineExceeded, http.StatusRequestTimeout},
	// Only the workspace's own permission errors, whose messages name
	// workspace paths: another fs.ErrPermission (an *os.PathError from
	// the host's state directory) may name a host path, and is answered
	// as a logged internal error.
	{workspace.ErrDenied, connect.CodePermissionDenied, http.StatusForbidden},
}

// errTooMany is a per-sandbox or per-host bound of the files API
// (watchers, files in one upload) that the request would pass.
var errTooMany = errors.New("over a limit")

// errStalled: a client's upload stopped arriving, or came slower than
// the server's pacing allows.
var errStalled = errors.New("body stalled")

// errEventsLost: a watcher dropped changes (the kernel's queue, or the
// events a poller keeps, overflowed); it ends rather than pretend.
var errEventsLost = errors.New("events lost")

// sandboxGone reports whether err says the sandbox no longer runs.
func sandboxGone(err error) bool {
	return errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrClosed) || errors.Is(err, sandbox.ErrDead)
}

// fsConnectError turns a files error into a Connect error: workspace's
// kinds by fsErrorKinds, the Manager's by connectError.
func fsConnectError(err error) error {
	for _, k := range fsErrorKinds {
		if errors.Is(err, k.kind) {
			return connect.NewError(k.code, err)
		}
	}
	return connectError(err)
}

// fsStatus is the HTTP status and message of a files error, for /files:
// a sandbox that no longer runs is 502, as E2B's proxy answers then, so
// the SDK says the sandbox is gone rather than the file.
func fsStatus(err error) int {
	for _, k := range fsErrorKinds {
		if errors.Is(err, k.kind) {
			return k.status
		}
	}
	if sandboxGone(err) {
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}
