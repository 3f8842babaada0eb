package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// initDir holds copies of warden-init, one per version, on a tmpfs of its
// own that every box binds its init from. The kernel names a bind in the
// box's /proc/self/mountinfo by its path inside its file system, so a
// bind of the installed binary would show the host's install path; a
// copy here shows only "/warden-init-<hash>" on tmpfs "warden-lib".
const initDir = StateDir + "/lib"

// initDirSize bounds initDir's tmpfs: room for a few versions' copies.
const initDirSize = 256 << 20

// installInit copies the init at src into initDir, named by its content,
// unless it is there already, and returns the copy's path. A lock file
// keeps two Wardens from mounting initDir twice or writing one copy
// together. Copies of other versions stay: a running older Warden may
// still start boxes from its own.
func installInit(src string) (string, error) {
	lock, err := os.OpenFile(filepath.Join(StateDir, "lib.lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", fmt.Errorf("opening the init copy's lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	if err := mountInitDir(); err != nil {
		return "", err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("reading the init: %w", err)
	}
	sum := sha256.Sum256(b)
	dst := filepath.Join(initDir, "warden-init-"+hex.EncodeToString(sum[:8]))
	if fi, err := os.Stat(dst); err == nil && fi.Size() == int64(len(b)) && fi.Mode().Perm() == 0o555 {
		return dst, nil
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o555); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("copying the init to %s: %w", initDir, err)
	}
	if err := os.Chmod(tmp, 0o555); err != nil {
		return "", fmt.Errorf("copying the init to %s: %w", initDir, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("copying the init to %s: %w", initDir, err)
	}
	return dst, nil
}

// mountInitDir mounts initDir's tmpfs unless it is mounted already (its
// device then differs from StateDir's).
func mountInitDir() error {
	if err := os.MkdirAll(initDir, 0o755); err != nil {
		return err
	}
	var dir, parent unix.Stat_t
	if err := unix.Stat(initDir, &dir); err != nil {
		return fmt.Errorf("stat %s: %w", initDir, err)
	}
	if err := unix.Stat(StateDir, &parent); err != nil {
		return fmt.Errorf("stat %s: %w", StateDir, err)
	}
	if dir.Dev != parent.Dev {
		return nil
	}
	data := fmt.Sprintf("mode=0755,size=%d", initDirSize)
	if err := unix.Mount("warden-lib", initDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting tmpfs at %s: %w", initDir, err)
	}
	return nil
}
