package state

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// secure makes sure no other user can reach into the state directory: it
// holds tenants' files, and a directory another user could rename or
// replace would let them swap a workspace's mount point for a link. Each
// directory up to / must belong to root or to us and, when others may
// write it, carry the sticky bit (as /tmp does); the directory and its
// subdirectories must be ours, and are made 0700. It returns the path
// with links resolved, which is what Warden uses from then on.
func secure(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("resolving state directory %s: %w", path, err)
	}
	uid := uint32(os.Geteuid())
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return "", fmt.Errorf("checking %s above state directory %s: %w", dir, path, err)
		}
		switch {
		case st.Uid != 0 && st.Uid != uid:
			return "", fmt.Errorf("state directory %s is unsafe: %s belongs to uid %d, who could replace it; choose a directory whose parents only root or you own", path, dir, st.Uid)
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return "", fmt.Errorf("state directory %s is unsafe: %s is writable by other users (mode %04o) without the sticky bit; choose another directory", path, dir, st.Mode&0o7777)
		}
		if dir == "/" {
			break
		}
	}
	for _, d := range []string{real, filepath.Join(real, sessionsDir), filepath.Join(real, workspacesDir)} {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return "", fmt.Errorf("checking %s: %w", d, err)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return "", fmt.Errorf("state directory %s is unsafe: %s is not a directory", path, d)
		case st.Uid != uid:
			return "", fmt.Errorf("state directory %s is unsafe: %s belongs to uid %d, not to this user (%d); choose another directory or chown it", path, d, st.Uid, uid)
		case st.Mode&0o077 != 0:
			if err := unix.Chmod(d, 0o700); err != nil {
				return "", storageError(path, "making "+d+" private", err)
			}
		}
	}
	return real, nil
}
