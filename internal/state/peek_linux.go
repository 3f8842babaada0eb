package state

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Peek reads the record of session id and the path of its scratch (""
// when it has none on the host) in the state directory at path, without
// its lock: another process, the running server, holds that. It is for
// the operator's CLI (warden template commit), which reads a live
// session's files while the server keeps serving it.
func Peek(path, id string) (Session, string, error) {
	if !validName(id) {
		return Session{}, "", fmt.Errorf("session %q: not a session id (ses_...)", id)
	}
	d := &Dir{path: path}
	s, err := readRecord(d.recordPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Session{}, "", fmt.Errorf("session %s: no record in %s: is it a live session of the server using this --state-dir?", id, filepath.Join(path, sessionsDir))
	}
	if err != nil {
		return Session{}, "", fmt.Errorf("session %s: reading its record: %w", id, err)
	}
	if s.Workspace == "" {
		return s, "", nil
	}
	return s, d.WorkspacePath(s.Workspace), nil
}
