package native

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// etcBase is where this user's /etc templates live (rootfs.SharedEtc):
// for root a directory of its own in /run, which the sandboxes' pool users
// may traverse (they may not traverse /run/warden); for anyone else one
// in the temporary directory, which the sandbox reaches as that user.
func etcBase() string {
	if os.Geteuid() == 0 {
		return "/run/warden-etc"
	}
	return filepath.Join(os.TempDir(), "warden-etc-"+strconv.Itoa(os.Geteuid()))
}

// devicesDir is where root's sandboxes bind their device nodes from
// (rootfs.SharedDevices); rootless sandboxes bind the host's /dev ones.
const devicesDir = "/run/warden-dev"

// refuseEtcOverlap refuses a workspace that holds the /etc templates'
// directory or lies inside it: the sandbox could rewrite the /etc that
// every later sandbox binds (a rootless user's templates are that user's
// own files). Directories are compared by device and inode, so another
// path to the same one, such as a bind mount, is caught as well.
func refuseEtcOverlap(workspace, base string) error {
	if workspace == "" {
		return nil
	}
	if ancestorOrSelf(workspace, base) || ancestorOrSelf(base, workspace) {
		return fmt.Errorf("workspace %q overlaps %s, where Warden keeps the /etc every sandbox sees: choose a workspace outside it", workspace, base)
	}
	return nil
}

// ancestorOrSelf says dir is path or one of the directories above it.
func ancestorOrSelf(dir, path string) bool {
	var want unix.Stat_t
	if unix.Stat(dir, &want) != nil {
		return false
	}
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			return true
		}
		if p == "/" || p == "." {
			return false
		}
	}
}
