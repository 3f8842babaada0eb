package workspace

import (
	"fmt"
	"strings"
)

// Limits of the kernel's path resolution (PATH_MAX, NAME_MAX), checked
// first so that an overlong path gets a clear error instead of an errno.
const (
	maxPathBytes = 4096
	maxNameBytes = 255
)

// mountPoint is where the sandbox sees its workspace; absolute paths must
// lie below it.
const mountPoint = "/workspace"

// wsPath is a validated path: plain elements below /workspace, none of
// them "", "." or "..".
type wsPath struct {
	elems []string
}

// parsePath accepts "x/y", "./x/y", "/workspace/x/y" and "." (the
// workspace itself), and refuses everything that is not a plain path
// inside /workspace, with a message saying how to fix it.
func parsePath(p string) (wsPath, error) {
	switch {
	case p == "":
		return wsPath{}, badPath(`empty path; use "." for the workspace itself`)
	case len(p) > maxPathBytes:
		return wsPath{}, badPath(fmt.Sprintf("path %q... is %d bytes, over the %d-byte limit; use a shorter path", p[:64], len(p), maxPathBytes))
	case strings.IndexByte(p, 0) >= 0:
		return wsPath{}, badPath(fmt.Sprintf("path %q contains a NUL byte; remove it", p))
	}
	rel := p
	if strings.HasPrefix(p, "/") {
		switch {
		case p == mountPoint:
			rel = "."
		case strings.HasPrefix(p, mountPoint+"/"):
			rel = p[len(mountPoint)+1:]
		default:
			return wsPath{}, badPath(fmt.Sprintf("path %q is outside /workspace; give a path relative to /workspace", p))
		}
	}
	if rel == "." {
		return wsPath{}, nil
	}
	var elems []string
	for e := range strings.SplitSeq(rel, "/") {
		switch {
		case e == "":
			return wsPath{}, badPath(fmt.Sprintf("path %q has an empty element (a double or trailing /); remove the extra /", p))
		case e == "..":
			return wsPath{}, badPath(fmt.Sprintf("path %q contains \"..\", which could leave /workspace; give the path without it", p))
		case len(e) > maxNameBytes:
			return wsPath{}, badPath(fmt.Sprintf("path %q has a name of %d bytes, over the %d-byte limit; use a shorter name", p, len(e), maxNameBytes))
		case e != ".":
			elems = append(elems, e)
		}
	}
	return wsPath{elems: elems}, nil
}

func badPath(msg string) error { return &pathError{msg: msg, kinds: []error{ErrBadPath}} }

// isRoot reports whether the path is the workspace itself.
func (w wsPath) isRoot() bool { return len(w.elems) == 0 }

// String is the path relative to /workspace in slash form, "." for the
// workspace itself: the form Entry.Path and every message use.
func (w wsPath) String() string {
	if w.isRoot() {
		return "."
	}
	return strings.Join(w.elems, "/")
}

// dir is the path's parent; base its final element. Both are meaningless
// for the root, which callers handle first.
func (w wsPath) dir() wsPath  { return wsPath{elems: w.elems[:len(w.elems)-1]} }
func (w wsPath) base() string { return w.elems[len(w.elems)-1] }

// child is the path of name inside w.
func (w wsPath) child(name string) wsPath {
	return wsPath{elems: append(w.elems[:len(w.elems):len(w.elems)], name)}
}
