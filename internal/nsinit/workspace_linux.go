package nsinit

import "golang.org/x/sys/unix"

// OpenWorkspace opens a workspace directory the one way both sides of the
// sandbox must: a path-only descriptor, reached without following any
// symbolic or magic link, so a link planted by an earlier sandbox cannot
// redirect a later one's workspace.
func OpenWorkspace(path string) (int, error) {
	return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}
