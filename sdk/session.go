package sdk

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
)

// Session is a handle on a long-lived sandbox: files in /workspace and the
// state of its language interpreters persist from one call to the next.
// Its methods may be called from several goroutines, but the server runs
// one exec at a time per session and answers a second with a conflict.
type Session struct {
	c  *Client
	id string
}

// ID returns the session's id ("ses_…"), to log it or to pick the session
// up again later with Client.Session.
func (s *Session) ID() string { return s.id }

// Info fetches the session's current state, timestamps, effective limits
// and exec count.
func (s *Session) Info(ctx context.Context) (*SessionInfo, error) {
	resp, err := s.c.api.GetSession(ctx, s.id)
	return decodeJSON[SessionInfo]("getting session "+s.id, resp, err, http.StatusOK)
}

// Pause stops every process of the session where it stands, keeping its
// memory (interpreter variables, background processes), so it uses no
// CPU and holds no run slot of the server; its TTL still ends it. The
// next Exec resumes it, or Resume does. A session running an exec
// answers a conflict: pause it once the exec ends.
func (s *Session) Pause(ctx context.Context) (*SessionInfo, error) {
	resp, err := s.c.api.PauseSession(ctx, s.id)
	return decodeJSON[SessionInfo]("pausing session "+s.id, resp, err, http.StatusOK)
}

// Resume lets a paused session's processes run again where they stopped,
// or restores a snapshotted one's files into a fresh sandbox (its
// processes start fresh); a running session is left as it is.
func (s *Session) Resume(ctx context.Context) (*SessionInfo, error) {
	resp, err := s.c.api.ResumeSession(ctx, s.id)
	return decodeJSON[SessionInfo]("resuming session "+s.id, resp, err, http.StatusOK)
}

// Snapshot writes the session's /workspace to disk on the server and
// closes its sandbox, so it holds no memory and no run slot until the
// next Exec, file call or Resume brings it back, also after the server
// restarts. It keeps files on every backend, and the sandbox's memory
// too only on gVisor over the stream transport (SnapshotInfo.Memory
// true: interpreter variables survive the resume); with Memory false
// processes and interpreter variables start fresh on resume. A server
// without a state directory answers ErrUnsupported.
func (s *Session) Snapshot(ctx context.Context) (*SessionInfo, error) {
	return s.SnapshotWith(ctx, SnapshotRequest{})
}

// SnapshotWith is Snapshot with the request's options: Memory false
// keeps files only, whatever the server's backend, so nothing the
// session's processes hold in memory reaches the server's disk.
func (s *Session) SnapshotWith(ctx context.Context, req SnapshotRequest) (*SessionInfo, error) {
	resp, err := s.c.api.SnapshotSession(ctx, s.id, req)
	return decodeJSON[SessionInfo]("snapshotting session "+s.id, resp, err, http.StatusOK)
}

// Fork makes count (1 to 16) new sessions from the session, each with
// its own id and the same spec, and returns handles on them. Each gets a
// copy of the session's files; on gVisor over the stream transport its
// memory too (interpreter variables kept, their random state reseeded;
// other in-memory state, keys and tokens included, is shared between
// the copies), elsewhere fresh processes. ForkWith with Memory false
// copies files only.
func (s *Session) Fork(ctx context.Context, count int) ([]*Session, error) {
	return s.ForkWith(ctx, ForkRequest{Count: count})
}

// ForkWith is Fork with the request's options: Memory false copies the
// session's files only, whatever the server's backend, so the copies
// start fresh processes, share nothing the session held in memory, and
// its memory never reaches the server's disk.
func (s *Session) ForkWith(ctx context.Context, req ForkRequest) ([]*Session, error) {
	resp, err := s.c.api.ForkSession(ctx, s.id, req)
	list, err := decodeJSON[SessionList]("forking session "+s.id, resp, err, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	out := make([]*Session, 0, len(list.Sessions))
	for _, in := range list.Sessions {
		out = append(out, s.c.Session(in.ID))
	}
	return out, nil
}

// Exec runs one command or snippet of code in the session and waits for it.
// A program that fails is not an error here: check the Result's ExitCode,
// TimedOut, OOMKilled and Exception.
func (s *Session) Exec(ctx context.Context, req ExecRequest) (*Result, error) {
	resp, err := s.c.api.ExecInSession(ctx, s.id, req)
	return decodeJSON[Result]("exec in session "+s.id, resp, err, http.StatusOK)
}

// Run runs argv directly (no shell; use "bash", "-c", script for shell
// syntax) in the session's /workspace.
func (s *Session) Run(ctx context.Context, argv ...string) (*Result, error) {
	return s.Exec(ctx, ExecRequest{Command: argv})
}

// RunCode runs code in the session's persistent interpreter for language,
// like a notebook cell: variables and imports survive to the next call,
// and the Result carries the trailing expression's Value, any Exception
// and rich Outputs such as matplotlib figures (see Result.PNGs).
func (s *Session) RunCode(ctx context.Context, language Language, code string) (*Result, error) {
	return s.Exec(ctx, ExecRequest{Language: language, Code: code})
}

// WriteFile uploads r to path (relative to /workspace or absolute under
// it), replacing any file there and creating parent directories. mode sets
// the permission bits (0 means the server's default, 0644); use 0755 for a
// script. A *bytes.Reader or *strings.Reader sends a Content-Length; other
// readers are streamed.
func (s *Session) WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode) (*FileEntry, error) {
	params := &UploadFileParams{Path: path}
	if mode != 0 {
		params.Mode = fmt.Sprintf("%04o", mode.Perm())
	}
	resp, err := s.c.api.UploadFileWithBody(ctx, s.id, params, "application/octet-stream", r)
	return decodeJSON[FileEntry]("writing "+path, resp, err, http.StatusCreated)
}

// ReadFile downloads the file at path whole, as os.ReadFile does for a
// local file.
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	resp, err := s.c.api.DownloadFile(ctx, s.id, &DownloadFileParams{Path: path})
	if err := check("reading "+path, resp, err, http.StatusOK); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("warden: reading %s: %w", path, err)
	}
	return b, nil
}

// ListFiles lists the directory at path ("" or "." for /workspace), sorted
// by name; FileList.Truncated says the server cut a huge directory short.
func (s *Session) ListFiles(ctx context.Context, path string) (*FileList, error) {
	resp, err := s.c.api.ListFiles(ctx, s.id, &ListFilesParams{Path: path})
	return decodeJSON[FileList]("listing "+path, resp, err, http.StatusOK)
}

// Mkdir creates the directory path and any missing parents, like
// os.MkdirAll: an existing directory is not an error.
func (s *Session) Mkdir(ctx context.Context, path string) (*FileEntry, error) {
	resp, err := s.c.api.MakeDirectory(ctx, s.id, &MakeDirectoryParams{Path: path})
	return decodeJSON[FileEntry]("creating directory "+path, resp, err, http.StatusCreated)
}

// Remove deletes a file, symlink or empty directory, like os.Remove; a
// non-empty directory answers a conflict.
func (s *Session) Remove(ctx context.Context, path string) error {
	resp, err := s.c.api.DeleteFile(ctx, s.id, &DeleteFileParams{Path: path})
	return expectNoContent("removing "+path, resp, err)
}

// RemoveAll deletes path and everything under it, like os.RemoveAll.
func (s *Session) RemoveAll(ctx context.Context, path string) error {
	resp, err := s.c.api.DeleteFile(ctx, s.id, &DeleteFileParams{Path: path, Recursive: true})
	return expectNoContent("removing "+path, resp, err)
}

// Close ends the session, killing what runs in it and discarding its
// files, and frees its slot of the server's session limit at once. A
// session that has already ended is not an error, so Close is safe to
// defer and to call twice.
func (s *Session) Close(ctx context.Context) error {
	resp, err := s.c.api.DeleteSession(ctx, s.id)
	if err := expectNoContent("closing session "+s.id, resp, err); err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}
