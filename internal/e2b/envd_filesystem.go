package e2b

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/e2b/filesystempb"
	"github.com/warden-sandbox/warden/internal/e2b/filesystempb/filesystempbconnect"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Bounds of the filesystem service, so a request or a hostile tree costs
// the host a bounded amount.
const (
	// maxFSMessageBytes bounds one request message: a few paths of at
	// most 4096 bytes each.
	maxFSMessageBytes = 64 << 10
	// maxListDepth is the deepest ListDir walks; a deeper request is
	// refused rather than cut short silently.
	maxListDepth = 64
	// maxListEntries bounds the entries of one ListDir, over all levels;
	// past it the call fails, naming the bound.
	maxListEntries = workspace.DefaultMaxEntries
)

// filesystemRoutes serves E2B's filesystem.Filesystem Connect service
// (unary calls and the WatchDir stream, JSON or binary as the client
// asks) on the envd mux. Every call acts on the workspace of the sandbox
// the router checked, as the sandbox user, through workspace.Dir.
func (s *Server) filesystemRoutes(mux *http.ServeMux) {
	(&fsService{s: s, watchers: s.watchers}).routes(mux)
}

// routes serves f's calls on mux.
func (f *fsService) routes(mux *http.ServeMux) {
	p, h := filesystempbconnect.NewFilesystemHandler(f, connect.WithReadMaxBytes(maxFSMessageBytes), noCompression)
	mux.Handle(p, f.s.chargedBodies(maxFSMessageBytes, knownProcedures("filesystem.Filesystem", fsProcedureNames, h)))
}

// fsProcedureNames are the service's procedures.
var fsProcedureNames = []string{
	filesystempbconnect.FilesystemStatProcedure, filesystempbconnect.FilesystemMakeDirProcedure,
	filesystempbconnect.FilesystemMoveProcedure, filesystempbconnect.FilesystemListDirProcedure,
	filesystempbconnect.FilesystemRemoveProcedure, filesystempbconnect.FilesystemWatchDirProcedure,
	filesystempbconnect.FilesystemCreateWatcherProcedure, filesystempbconnect.FilesystemGetWatcherEventsProcedure,
	filesystempbconnect.FilesystemRemoveWatcherProcedure,
}

// fsService implements filesystempbconnect.FilesystemHandler.
type fsService struct {
	s        *Server
	watchers *watchers
}

// at opens the workspace of the request's sandbox and maps p into it,
// after checking the user the request names.
func (f *fsService) at(ctx context.Context, h http.Header, p string) (workspace.Files, string, error) {
	if err := checkUser(basicUser(h)); err != nil {
		return nil, "", fsConnectError(err)
	}
	wp, err := workspacePath(p)
	if err != nil {
		return nil, "", fsConnectError(err)
	}
	sb := sandboxFrom(ctx)
	dir, err := f.s.cfg.Sessions.Files(ctx, sb.Owner, sb.ID)
	if err != nil {
		return nil, "", fsConnectError(err)
	}
	return dir, wp, nil
}

// basicUser is the user of the request's Basic authorization, which the
// SDK sends to name the user a call acts as; "" when there is none.
func basicUser(h http.Header) string {
	if h.Get("Authorization") == "" {
		return ""
	}
	user, _, ok := (&http.Request{Header: h}).BasicAuth()
	if !ok {
		return "(an Authorization header that is not Basic)"
	}
	return user
}

// Stat describes a path as lstat does: a symbolic link as itself.
func (f *fsService) Stat(ctx context.Context, req *connect.Request[filesystempb.StatRequest]) (*connect.Response[filesystempb.StatResponse], error) {
	dir, p, err := f.at(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := dir.Stat(p)
	if err != nil {
		return nil, fsConnectError(err)
	}
	return connect.NewResponse(&filesystempb.StatResponse{Entry: entryInfo(e, ownersOf(dir))}), nil
}

// MakeDir creates a directory and its parents; an existing directory is
// already_exists (the SDK's makeDir then answers false), an existing
// non-directory invalid_argument, as envd answers.
func (f *fsService) MakeDir(ctx context.Context, req *connect.Request[filesystempb.MakeDirRequest]) (*connect.Response[filesystempb.MakeDirResponse], error) {
	dir, p, err := f.at(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if e, err := dir.Stat(p); err == nil {
		if e.Type == workspace.TypeDir {
			return nil, connect.NewError(connect.CodeAlreadyExists, kindErrorf(workspace.ErrExists, "directory %q already exists", req.Msg.GetPath()))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, kindErrorf(workspace.ErrExists, "path %q already exists and is not a directory; remove it or choose another name", req.Msg.GetPath()))
	}
	e, err := dir.Mkdir(p)
	if err != nil {
		return nil, fsConnectError(err)
	}
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: entryInfo(e, ownersOf(dir))}), nil
}

// Move renames source to destination, creating the destination's
// directories, and answers the moved entry.
func (f *fsService) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	dir, src, err := f.at(ctx, req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	dst, err := workspacePath(req.Msg.GetDestination())
	if err != nil {
		return nil, fsConnectError(err)
	}
	e, err := dir.Rename(src, dst)
	if err != nil {
		return nil, fsConnectError(err)
	}
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: entryInfo(e, ownersOf(dir))}), nil
}

// Remove deletes a path and everything below it; a missing path is no
// error, as envd's RemoveAll.
func (f *fsService) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	dir, p, err := f.at(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := dir.Remove(p, true); err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return nil, fsConnectError(err)
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}

// ListDir lists a directory to a depth (0 means 1), depth first and by
// name at each level, as envd's walk does; symbolic links are listed,
// never entered. Past maxListDepth or maxListEntries it fails, naming the
// bound, rather than answering part of the tree as if it were all.
func (f *fsService) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	if depth > maxListDepth {
		return nil, connect.NewError(connect.CodeInvalidArgument, kindErrorf(workspace.ErrBadPath, "depth %d is over Warden's limit of %d; list with a smaller depth", depth, maxListDepth))
	}
	dir, p, err := f.at(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	w := treeWalk{dir: dir, budget: maxListEntries, top: req.Msg.GetPath()}
	if err := w.list(ctx, p, depth); err != nil {
		return nil, fsConnectError(err)
	}
	o := ownersOf(dir)
	out := make([]*filesystempb.EntryInfo, len(w.out))
	for i, e := range w.out {
		out[i] = entryInfo(e, o)
	}
	return connect.NewResponse(&filesystempb.ListDirResponse{Entries: out}), nil
}

// treeWalk is one ListDir's walk: what it found and how many more
// entries it may take.
type treeWalk struct {
	dir    workspace.Files
	budget int
	top    string
	out    []workspace.Entry
}

// list appends p's entries, and to depth-1 levels below each directory's.
// A subdirectory that vanished, turned into a link or shut its
// permissions meanwhile is listed but not entered: the sandbox can change
// its tree at any time, and one such directory should not fail the call.
func (w *treeWalk) list(ctx context.Context, p string, depth int) error {
	ents, err := w.dir.List(p)
	if errors.Is(err, workspace.ErrTruncated) || err == nil && len(ents) > w.budget {
		return w.overflow()
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if w.budget == 0 {
			return w.overflow()
		}
		w.budget--
		w.out = append(w.out, e)
		if e.Type != workspace.TypeDir || depth <= 1 {
			continue
		}
		err := w.list(ctx, path.Join(boxHome, e.Path), depth-1)
		if err != nil && !skippable(err) {
			return err
		}
	}
	return nil
}

func (w *treeWalk) overflow() error {
	return kindErrorf(workspace.ErrTruncated, "listing %q: more than %d entries; list a subdirectory or with a smaller depth", w.top, maxListEntries)
}

// skippable reports whether a subdirectory's listing error only means the
// sandbox changed or closed that directory.
func skippable(err error) bool {
	for _, kind := range []error{workspace.ErrNotFound, workspace.ErrLink, workspace.ErrNotDir, workspace.ErrIsDir} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return errors.Is(err, fs.ErrPermission)
}
