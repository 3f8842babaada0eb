package native

import (
	"os"
	"path/filepath"
	"strconv"
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
