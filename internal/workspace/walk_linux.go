package workspace

import (
	"errors"
	"fmt"
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
// dirfd one component at a time with openat, O_PATH and O_NOFOLLOW,
// refusing what resolveFlags make openat2 refuse: an absolute path or
// ".." (EXDEV; stricter than RESOLVE_BENEATH, which allows a ".." that
// stays below), a symbolic link anywhere, magic /proc links included
// (ELOOP), a component on a mount other than dirfd's (EXDEV, by statx's
// mount id). Every component, the last too, is checked through an
// O_PATH descriptor before anything opens it for real, so that, as with
// openat2, a refused file is never opened (no O_TRUNC, no device's or
// FIFO's open); the last is then reopened from that descriptor with the
// caller's flags (reopenChecked). O_CREAT needs O_EXCL here, which opens
// no existing file. It cannot see a concurrent rename move a directory
// it walks out of the tree (openat2 retries its ".." steps on one); the
// caller then reaches only what its identity (the sandbox user's) can,
// and in a bind-mounted workspace a rename cannot leave the mount.
func walkBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	parts, slash, err := components(rel)
	if err != nil {
		return -1, err
	}
	switch {
	case flags&unix.O_CREAT != 0 && flags&unix.O_EXCL == 0:
		// O_CREAT alone would open an existing file before its check
		return -1, unix.EINVAL
	case flags&unix.O_CREAT != 0 && slash:
		return -1, unix.EISDIR
	}
	mnt, err := mountID(dirfd)
	if err != nil {
		return -1, err
	}
	cur, err := unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	typ := uint16(unix.S_IFDIR)
	for i, name := range parts {
		last := i == len(parts)-1
		f, m := unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(0)
		if last && flags&unix.O_CREAT != 0 {
			// O_EXCL: a new file or EEXIST, never one that is there
			f, m = flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode
		}
		next, err := unix.Openat(cur, name, f, m)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		dir := !last || slash || flags&unix.O_DIRECTORY != 0
		typ, err = checkStep(next, mnt, dir, last && !slash && flags&pathNoFollow == pathNoFollow)
		if err != nil {
			unix.Close(next)
			return -1, err
		}
		cur = next
	}
	if flags&unix.O_PATH != 0 || (len(parts) > 0 && flags&unix.O_CREAT != 0) {
		return cur, nil
	}
	defer unix.Close(cur)
	return reopenChecked(cur, typ, flags)
}

// reopenChecked opens pfd, an O_PATH descriptor walkBeneath has checked,
// with flags, following nothing but pfd itself: a directory as "." of
// it, anything else through its /proc/self/fd link, which names the
// very file pfd holds (O_NOFOLLOW dropped: that link is the one to
// follow).
func reopenChecked(pfd int, typ uint16, flags int) (int, error) {
	if typ == unix.S_IFDIR {
		return unix.Openat(pfd, ".", flags|unix.O_CLOEXEC, 0)
	}
	return unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), (flags&^unix.O_NOFOLLOW)|unix.O_CLOEXEC, 0)
}

// components splits rel into its names, "." and empty ones dropped, and
// says whether it ends in "/" (the last must then be a directory);
// EXDEV for an absolute path or a "..", as RESOLVE_BENEATH answers one
// that leaves, and ENOENT for "", as openat2 answers.
func components(rel string) ([]string, bool, error) {
	switch {
	case rel == "":
		return nil, false, unix.ENOENT
	case strings.HasPrefix(rel, "/"):
		return nil, false, unix.EXDEV
	}
	var parts []string
	for _, name := range strings.Split(rel, "/") {
		switch name {
		case "", ".":
		case "..":
			return nil, false, unix.EXDEV
		default:
			parts = append(parts, name)
		}
	}
	return parts, strings.HasSuffix(rel, "/"), nil
}

// pathNoFollow, in the caller's flags, asks for a final symbolic link
// itself, which openat2 gives even with RESOLVE_NO_SYMLINKS (lstat's
// way, for Stat).
const pathNoFollow = unix.O_PATH | unix.O_NOFOLLOW

// checkStep refuses fd, one component of the walk, if it is a symbolic
// link (O_PATH|O_NOFOLLOW opens the link itself) unless link allows it,
// not a directory when dir, or on a mount other than mnt; it returns
// fd's file type.
func checkStep(fd int, mnt uint64, dir, link bool) (uint16, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_TYPE|unix.STATX_MNT_ID, &st); err != nil {
		return 0, err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errNoResolve
	}
	typ := st.Mode & unix.S_IFMT
	switch {
	case typ == unix.S_IFLNK && !link:
		return 0, unix.ELOOP
	case dir && typ != unix.S_IFDIR:
		return 0, unix.ENOTDIR
	case st.Mnt_id != mnt:
		return 0, unix.EXDEV
	}
	return typ, nil
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
