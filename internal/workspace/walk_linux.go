package workspace

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// openat2 is unix.Openat2; tests replace it to take the fallback walk.
var openat2 = unix.Openat2

// errNoResolve is the error when neither openat2 nor the walk that
// stands in for it works here.
var errNoResolve = errors.New("neither openat2 nor statx's mount id is available (a kernel before 5.8, or a seccomp filter that denies them): Warden cannot open files below the workspace safely here")

// walkBeneath is openBeneath where openat2 answers ENOSYS: a Linux
// before 5.6, or a seccomp filter, such as a native Warden sandbox's,
// which denies openat2 because the mode it would create a file with is
// in a struct seccomp cannot read (internal/seccomp). It opens rel below
// dirfd one component at a time with openat and O_NOFOLLOW, refusing
// what resolveFlags make openat2 refuse: an absolute path or ".."
// (EXDEV; stricter than RESOLVE_BENEATH, which allows a ".." that stays
// below), a symbolic link anywhere, magic /proc links included (ELOOP),
// a component on a mount other than dirfd's (EXDEV, by statx's mount
// id). It cannot see a concurrent rename move a directory it walks out
// of the tree, which openat2 answers EAGAIN; the caller then reaches
// only what its identity (the sandbox user's) can, and in a bind-mounted
// workspace a rename cannot leave the mount.
func walkBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	parts, err := components(rel)
	if err != nil {
		return -1, err
	}
	mnt, err := mountID(dirfd)
	if err != nil {
		return -1, err
	}
	cur, err := unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for i, name := range parts {
		last := i == len(parts)-1
		f, m := unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(0)
		if last {
			f, m = flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode
		}
		next, err := unix.Openat(cur, name, f, m)
		if errors.Is(err, unix.ENOTDIR) && isLink(cur, name) {
			// O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR; openat2 ELOOP
			err = unix.ELOOP
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		if err := checkStep(next, mnt, !last, last && flags&pathNoFollow == pathNoFollow); err != nil {
			unix.Close(next)
			return -1, err
		}
		cur = next
	}
	if len(parts) == 0 && flags&unix.O_PATH == 0 {
		// "." itself, opened as asked rather than as a path
		defer unix.Close(cur)
		return unix.Openat(cur, ".", flags|unix.O_CLOEXEC, mode)
	}
	return cur, nil
}

// components splits rel into its names, "." and empty ones dropped;
// EXDEV for an absolute path or a "..", as RESOLVE_BENEATH answers one
// that leaves.
func components(rel string) ([]string, error) {
	if strings.HasPrefix(rel, "/") {
		return nil, unix.EXDEV
	}
	var parts []string
	for _, name := range strings.Split(rel, "/") {
		switch name {
		case "", ".":
		case "..":
			return nil, unix.EXDEV
		default:
			parts = append(parts, name)
		}
	}
	return parts, nil
}

// pathNoFollow, in the caller's flags, asks for a final symbolic link
// itself, which openat2 gives even with RESOLVE_NO_SYMLINKS (lstat's
// way, for Stat).
const pathNoFollow = unix.O_PATH | unix.O_NOFOLLOW

// checkStep refuses fd, one component of the walk, if it is a symbolic
// link (O_PATH|O_NOFOLLOW opens the link itself) unless link allows it,
// not a directory when dir, or on a mount other than mnt.
func checkStep(fd int, mnt uint64, dir, link bool) error {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_TYPE|unix.STATX_MNT_ID, &st); err != nil {
		return err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return errNoResolve
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK && !link:
		return unix.ELOOP
	case dir && st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return unix.ENOTDIR
	case st.Mnt_id != mnt:
		return unix.EXDEV
	}
	return nil
}

// isLink says name in dirfd is a symbolic link.
func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// mountID is the id of the mount fd is on.
func mountID(fd int) (uint64, error) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_MNT_ID, &st)
	if errors.Is(err, unix.ENOSYS) || (err == nil && st.Mask&unix.STATX_MNT_ID == 0) {
		return 0, errNoResolve
	}
	return st.Mnt_id, err
}
