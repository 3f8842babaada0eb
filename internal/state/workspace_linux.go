package state

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/rootfs"
)

// Workspace is a session's persistent writable space: a tmpfs the server
// mounts in its own mount namespace, so it survives the server, holding
// the directories of rootfs.ScratchDirs, which the sandbox binds as its
// /workspace, /tmp, HOME and /dev/shm (one size bounds them together, as
// in a sandbox of its own). On the host its files belong to
// hostid.WorkspaceOwner; the sandbox sees them as its user's through an
// idmapped bind. Files are fetched from its workspace directory.
type Workspace struct {
	Name string
	Path string
}

// NewWorkspace mounts a fresh tmpfs of size bytes and inodes inodes.
func (d *Dir) NewWorkspace(size, inodes int64) (Workspace, error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	w := Workspace{Name: "ws_" + hex.EncodeToString(b[:])}
	w.Path = d.WorkspacePath(w.Name)
	if err := os.Mkdir(w.Path, 0o700); err != nil {
		return Workspace{}, storageError(d.path, "making workspace "+w.Name, err)
	}
	if err := rootfs.MountScratch(w.Path, size, inodes, hostid.WorkspaceOwner, hostid.WorkspaceOwner); err != nil {
		// Only a mount that half-happened is there to undo; EINVAL says
		// there is none, and a mount left makes the Remove fail, reported.
		_ = unix.Unmount(w.Path, unix.MNT_DETACH)
		return Workspace{}, errors.Join(fmt.Errorf("making workspace %s: %w", w.Name, err), os.Remove(w.Path))
	}
	return w, nil
}

// WorkspacePath is where workspace name is mounted.
func (d *Dir) WorkspacePath(name string) string {
	return filepath.Join(d.path, workspacesDir, name)
}

// OpenFiles opens the directory of workspace name that is the sandbox's
// /workspace, as an O_PATH descriptor that follows no link.
func (d *Dir) OpenFiles(name string) (*os.File, error) {
	if !validName(name) {
		return nil, fmt.Errorf("opening workspace %q: not a workspace name", name)
	}
	return rootfs.OpenScratchWorkspace(d.WorkspacePath(name))
}

// DropWorkspace unmounts workspace name and removes its mount point; the
// memory is freed once nothing holds a file there. A missing one is no
// error.
func (d *Dir) DropWorkspace(name string) error {
	if !validName(name) {
		return fmt.Errorf("removing workspace %q: not a workspace name", name)
	}
	p := d.WorkspacePath(name)
	if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting workspace %s: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storageError(d.path, "removing workspace "+name, err)
	}
	return nil
}

// SealWorkspace makes workspace name read-only at its host mount point,
// where a dead session's files are read from: nothing may change the
// files of a session that no longer runs.
func (d *Dir) SealWorkspace(name string) error {
	p := d.WorkspacePath(name)
	if err := unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making workspace %s read-only: %w", name, err)
	}
	return nil
}

// Mounted says whether workspace name is still a mount point, as it is
// after the server dies; after the host restarts it is an empty directory
// and its files are gone.
func (d *Dir) Mounted(name string) bool {
	var st, parent unix.Statx_t
	p := d.WorkspacePath(name)
	if unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st) != nil {
		return false
	}
	if unix.Statx(unix.AT_FDCWD, filepath.Dir(p), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &parent) != nil {
		return false
	}
	return st.Mnt_id != parent.Mnt_id
}

// Workspaces lists the names of every workspace in the directory, those
// of sessions and any a crash left half made.
func (d *Dir) Workspaces() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(d.path, workspacesDir))
	if err != nil {
		return nil, fmt.Errorf("reading workspaces of %s: %w", d.path, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && validName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// HasWorkspace says whether workspace name's mount point exists, mounted
// or not: DropWorkspace removes it, a restart of the host does not.
func (d *Dir) HasWorkspace(name string) bool {
	var st unix.Stat_t
	return validName(name) && unix.Lstat(d.WorkspacePath(name), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}
