package workspace

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// AddWatch adds directory p to the inotify instance inotifyFD with mask,
// and returns the watch descriptor. The directory is opened link-safely
// (O_PATH, below the workspace, no link in any component) as the sandbox
// user, and the watch is added through that descriptor's /proc/self/fd
// entry, which names exactly the inode opened: the path is never looked up
// again, so a link or rename planted meanwhile cannot redirect the watch
// to a directory outside the workspace. IN_ONLYDIR is always added. The
// host's watch limit reached is ENOSPC, not ErrNoSpace.
func (d *Dir) AddWatch(inotifyFD int, p string, mask uint32) (int, error) {
	wp, err := parsePath(p)
	if err != nil {
		return -1, err
	}
	wd := -1
	err = d.do(func(root int) error {
		fd, err := openBeneath(root, wp.String(), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fsError("watching", wp, err)
		}
		defer unix.Close(fd)
		wd, err = unix.InotifyAddWatch(inotifyFD, fmt.Sprintf("/proc/self/fd/%d", fd), mask|unix.IN_ONLYDIR)
		if errors.Is(err, unix.ENOSPC) {
			// Not a full disk: the host's bound on inotify watches.
			return errorf(err, "watching %q: the host's limit on inotify watches (fs.inotify.max_user_watches) is reached; watch fewer directories", wp)
		}
		if err != nil {
			return fsError("watching", wp, err)
		}
		return nil
	})
	return wd, err
}
