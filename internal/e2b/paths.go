package e2b

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// E2B's SDKs assume the user "user" with home and default working
// directory /home/user; Warden's sandbox user works in /workspace. At this
// boundary /home/user is an alias of /workspace, both ways: paths from the
// SDK are mapped in by boxPath and paths to it out by e2bPath. Inside the
// box nothing is faked: HOME is what the box sets.
const (
	e2bHome = "/home/user"
	boxHome = "/workspace"
	// maxPathBytes bounds a path from a client, as Linux's PATH_MAX does.
	maxPathBytes = 4096
)

// boxPath maps a path the SDK sent to the path inside the box: ~ and
// ~/... are the home, as envd expands them (~name/... is refused, as
// envd refuses it), relative paths are from the home, /home/user and
// what is under it move to /workspace, and the result is clean. It
// refuses what no file can be named (NUL bytes, over PATH_MAX) with an
// error that says so.
func boxPath(p string) (string, error) {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "", errors.New("path contains a NUL byte: remove it")
	case len(p) > maxPathBytes:
		return "", fmt.Errorf("path is %d bytes, more than the %d allowed: use a shorter one", len(p), maxPathBytes)
	case strings.HasPrefix(p, "~"):
		if len(p) > 1 && p[1] != '/' && p[1] != '\\' {
			return "", fmt.Errorf("path %q names another user's home, which cannot be expanded: use ~/ or an absolute path", p)
		}
		p = boxHome + "/" + p[1:]
	}
	if !path.IsAbs(p) {
		p = boxHome + "/" + p
	}
	p = path.Clean(p)
	if rest, ok := under(p, e2bHome); ok {
		return boxHome + rest, nil
	}
	return p, nil
}

// e2bPath maps a path inside the box back to what the SDK expects:
// /workspace and what is under it become /home/user.
func e2bPath(p string) string {
	if rest, ok := under(p, boxHome); ok {
		return e2bHome + rest
	}
	return p
}

// under says whether the clean path p is dir or inside it, and gives the
// rest of p after dir ("" or "/...").
func under(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir):], true
	}
	return "", false
}
