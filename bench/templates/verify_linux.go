package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/internal/template"
)

// inoProgram prints the inode of the python3 the sandbox runs.
const inoProgram = "import os, sys; print(os.stat(os.path.realpath(sys.executable)).st_ino)"

// rootUsed says which root a run of c on backend be used, by the inode of
// its python3: the template's copy in the store, the host's, or neither
// (a backend that shows inodes of its own, such as gVisor's). A backend
// that ignores --template runs on the host, and timing it would compare
// host with host.
func (c *contender) rootUsed(warden, be, state string) (string, error) {
	out, err := output(warden, "run", "--backend", be, "--state-dir", state, "--template", c.template,
		"--", "python3", "-c", inoProgram)
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, measure.Tail(out))
	}
	ino, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return "", fmt.Errorf("reading the inode from %q: %w", measure.Tail(out), err)
	}
	s, err := template.Open(filepath.Join(state, "templates"), template.Options{})
	if err != nil {
		return "", fmt.Errorf("opening the store: %w", err)
	}
	t, err := s.Get(c.template)
	if err != nil {
		return "", fmt.Errorf("reading template %s: %w", c.template, err)
	}
	switch ino {
	case inode(filepath.Join(t.Root, "usr/bin/python3")):
		return "template", nil
	case inode("/usr/bin/python3"):
		return "host", nil
	}
	return "unverified", nil
}

// inode is the inode of the file p resolves to (inside its own tree when
// p is in a template: a template's absolute links name its own files).
func inode(p string) uint64 {
	for range 8 {
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if filepath.IsAbs(target) {
			root := strings.SplitN(p, "/usr/", 2)[0]
			p = filepath.Join(root, target)
		} else {
			p = filepath.Join(filepath.Dir(p), target)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0
	}
	return st.Ino
}
