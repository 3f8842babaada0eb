package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/warden-sandbox/warden/internal/server/apigen"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// fileEntryJSON is the spec's FileEntry. Paths are absolute inside the
// sandbox (/workspace/...), the form code running there uses.
type fileEntryJSON struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	Mode       string    `json:"mode"`
	ModifiedAt time.Time `json:"modified_at"`
}

type fileListJSON struct {
	Path      string          `json:"path"`
	Entries   []fileEntryJSON `json:"entries"`
	Truncated bool            `json:"truncated"`
}

// sandboxPath turns a workspace-relative path ("." or "a/b") into the
// absolute path the sandbox sees.
func sandboxPath(rel string) string {
	return path.Join("/workspace", rel)
}

func toFileEntry(e workspace.Entry) fileEntryJSON {
	size := e.Size
	if e.Type == workspace.TypeDir {
		size = 0 // a directory's st_size means nothing portable
	}
	return fileEntryJSON{
		Name:       e.Name,
		Path:       sandboxPath(e.Path),
		Type:       e.Type,
		Size:       size,
		Mode:       fmt.Sprintf("%04o", e.Mode.Perm()),
		ModifiedAt: e.ModTime.UTC(),
	}
}

// files opens the caller's session's workspace, or answers the error.
func (a api) files(w http.ResponseWriter, r *http.Request, id string) (workspace.Files, bool) {
	dir, err := a.s.sessions.Files(r.Context(), owner(r), id)
	if err != nil {
		a.s.writeError(w, err)
		return nil, false
	}
	return dir, true
}

// transfer opens the caller's session's workspace for an upload or a
// download, which counts against MaxTransfersPerSession until done is
// called, or answers the error.
func (a api) transfer(w http.ResponseWriter, r *http.Request, id string) (dir workspace.Files, done func(), ok bool) {
	dir, ok = a.files(w, r, id)
	if !ok {
		return nil, nil, false
	}
	done, err := a.s.transfers.start(id)
	if err != nil {
		a.s.writeError(w, err)
		return nil, nil, false
	}
	return dir, done, true
}

// DownloadFile streams a regular file's bytes. Exactly the size the
// workspace checked is sent, so a file the sandbox grows meanwhile cannot
// push more than was announced in Content-Length. A client that stops
// reading for StreamWriteTimeout is cut off, which frees the connection
// and the open file; a session has at most MaxTransfersPerSession
// uploads and downloads at once (503 past them).
func (a api) DownloadFile(w http.ResponseWriter, r *http.Request, id string, params apigen.DownloadFileParams) {
	dir, done, ok := a.transfer(w, r, id)
	if !ok {
		return
	}
	defer done()
	rc, e, err := dir.Read(params.Path)
	if err != nil {
		a.s.writeError(w, wrongKind(err))
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(e.Size, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if _, err := io.CopyN(w, rc, e.Size); err != nil {
		a.s.log.Debug("download cut short", "session", id, "err", err)
	}
}

// wrongKind answers a read of the wrong kind of thing (downloading a
// directory, listing a file) as a bad request: nothing is in conflict
// there, the request names the wrong path.
func wrongKind(err error) error {
	if ae := toAPIError(err); ae.status == http.StatusConflict {
		return badRequest("%s", ae.message)
	}
	return err
}

// capped is the upload body, bounded at the server's upload limit; it
// remembers hitting the bound, which the workspace's own error may not
// carry through.
type capped struct {
	r    io.Reader
	over bool
}

func (c *capped) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		c.over = true
	}
	return n, err
}

// UploadFile writes the request body to a file, streaming it without
// holding it in memory, and answers 201 with the new file's entry. An
// upload that stops sending for BodyReadTimeout, or falls below
// minBodyRate on average, is cut off with 408.
func (a api) UploadFile(w http.ResponseWriter, r *http.Request, id string, params apigen.UploadFileParams) {
	limit := a.s.cfg.MaxUploadBytes
	if r.ContentLength > limit {
		a.s.writeError(w, tooLarge(limit))
		return
	}
	mode := fs.FileMode(0o644)
	if params.Mode != "" {
		m, err := strconv.ParseUint(params.Mode, 8, 32)
		if err != nil || m > 0o777 {
			a.s.writeError(w, badRequest("query parameter mode: %q is not permission bits in octal, such as 0644", params.Mode))
			return
		}
		mode = fs.FileMode(m)
	}
	dir, done, ok := a.transfer(w, r, id)
	if !ok {
		return
	}
	defer done()
	paced := a.s.pace(w, r, limit)
	body := &capped{r: http.MaxBytesReader(w, paced, limit)}
	e, err := dir.Write(params.Path, body, mode)
	switch {
	case body.over:
		a.s.writeError(w, tooLarge(limit))
	case paced.stalled:
		a.s.writeError(w, errBodyTimeout(a.s.cfg.BodyReadTimeout))
	case err != nil:
		a.s.writeError(w, err)
	default:
		writeJSON(w, http.StatusCreated, toFileEntry(e))
	}
}

// DeleteFile removes a file, link or empty directory, or with recursive a
// whole tree, and answers 204.
func (a api) DeleteFile(w http.ResponseWriter, r *http.Request, id string, params apigen.DeleteFileParams) {
	dir, ok := a.files(w, r, id)
	if !ok {
		return
	}
	if err := dir.Remove(params.Path, params.Recursive); err != nil {
		a.s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ListFiles answers a directory's entries, sorted by name; past the
// workspace's entry limit it answers those it has with truncated set.
func (a api) ListFiles(w http.ResponseWriter, r *http.Request, id string, params apigen.ListFilesParams) {
	p := params.Path
	if p == "" {
		p = "."
	}
	dir, ok := a.files(w, r, id)
	if !ok {
		return
	}
	entries, err := dir.List(p)
	truncated := errors.Is(err, workspace.ErrTruncated)
	if err != nil && !truncated {
		a.s.writeError(w, wrongKind(err))
		return
	}
	self, err := dir.Stat(p)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	out := fileListJSON{Path: sandboxPath(self.Path), Entries: make([]fileEntryJSON, 0, len(entries)), Truncated: truncated}
	for _, e := range entries {
		out.Entries = append(out.Entries, toFileEntry(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// MakeDirectory creates a directory and its missing parents, and answers
// 201 with its entry; an existing directory is not an error.
func (a api) MakeDirectory(w http.ResponseWriter, r *http.Request, id string, params apigen.MakeDirectoryParams) {
	dir, ok := a.files(w, r, id)
	if !ok {
		return
	}
	e, err := dir.Mkdir(params.Path)
	if err != nil {
		a.s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toFileEntry(e))
}
