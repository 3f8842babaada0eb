//go:build !linux

package state

import (
	"errors"
	"fmt"
	"os"
)

// Dir is a state directory; off Linux there is none.
type Dir struct{}

// Workspace is a session's persistent workspace; Linux-only.
type Workspace struct {
	Name string
	Path string
}

// Open is Linux-only: workspaces are tmpfs mounts.
func Open(path string) (*Dir, error) {
	return nil, fmt.Errorf("state directory %s: %w", path, errors.ErrUnsupported)
}

// Path is Linux-only, like Open.
func (d *Dir) Path() string { return "" }

// Close is Linux-only, like Open.
func (d *Dir) Close() error { return nil }

// SaveSession is Linux-only, like Open.
func (d *Dir) SaveSession(Session) error { return errors.ErrUnsupported }

// SaveSessionSync is Linux-only, like Open.
func (d *Dir) SaveSessionSync(Session) error { return errors.ErrUnsupported }

// RemoveSession is Linux-only, like Open.
func (d *Dir) RemoveSession(string) error { return errors.ErrUnsupported }

// Sessions is Linux-only, like Open.
func (d *Dir) Sessions() ([]Session, error) { return nil, errors.ErrUnsupported }

// NewWorkspace is Linux-only, like Open.
func (d *Dir) NewWorkspace(size, inodes int64) (Workspace, error) {
	return Workspace{}, errors.ErrUnsupported
}

// WorkspacePath is Linux-only, like Open.
func (d *Dir) WorkspacePath(string) string { return "" }

// OpenFiles is Linux-only, like Open.
func (d *Dir) OpenFiles(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// DropWorkspace is Linux-only, like Open.
func (d *Dir) DropWorkspace(string) error { return errors.ErrUnsupported }

// SealWorkspace is Linux-only, like Open.
func (d *Dir) SealWorkspace(string) error { return errors.ErrUnsupported }

// Mounted is Linux-only, like Open.
func (d *Dir) Mounted(string) bool { return false }

// Workspaces is Linux-only, like Open.
func (d *Dir) Workspaces() ([]string, error) { return nil, errors.ErrUnsupported }

// HasWorkspace is Linux-only, like Open.
func (d *Dir) HasWorkspace(string) bool { return false }

// Peek is Linux-only, like Open.
func Peek(string, string) (Session, string, error) { return Session{}, "", errors.ErrUnsupported }
