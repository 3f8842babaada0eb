package interp

import (
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Available lists, sorted, the languages whose interpreter program
// exists in the root tree at rootDir: "" is the host's root (which a
// sandbox on no template sees), anything else a template's. A template's
// tree is read as its own root: its links, absolute ones included,
// resolve inside it and never reach the host's files.
func Available(rootDir string) []string {
	var out []string
	for _, name := range Languages() {
		if languages[name].availableIn(rootDir) {
			out = append(out, name)
		}
	}
	return out
}

// availableIn reports whether the root at rootDir ("" for the host's)
// has the interpreter at one of its usual paths, as an executable file.
func (l *language) availableIn(rootDir string) bool {
	for _, p := range l.hostPaths {
		if isExecutable(resolveIn(rootDir, p)) {
			return true
		}
	}
	return false
}

// isExecutable says p is an executable file. It follows links: the
// host's own paths are resolved by the kernel, a template's by resolveIn
// (which leaves none).
func isExecutable(p string) bool {
	if p == "" {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// maxLinks bounds the links followed resolving one path, as the
// kernel's ELOOP does.
const maxLinks = 40

// resolveIn resolves the absolute path p as the root at rootDir sees it
// and returns the host path of what it names, with no link left to
// follow, or "" if it cannot be resolved (missing, a loop). With rootDir
// "" it is the host's own resolution.
func resolveIn(rootDir, p string) string {
	if rootDir == "" {
		return p
	}
	cur := "/" // resolved so far, inside the root
	rest := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		var st unix.Stat_t
		if unix.Lstat(rootDir+next, &st) != nil {
			return ""
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return ""
		}
		target, err := os.Readlink(rootDir + next)
		if err != nil {
			return ""
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return rootDir + cur
}
