package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/internal/template"
)

// countProgram prints how many entries the sandbox's /usr/bin holds.
const countProgram = "import os; print(len(os.listdir('/usr/bin')))"

// rootUsed says which root a run of c on backend be used, by how many
// entries its /usr/bin holds: as many as the template's in the store, as
// the host's, or neither. (Inodes would tell apart only on native: gVisor
// shows inodes of its own.) A backend that ignores --template runs on the
// host, and timing it would compare host with host.
func (c *contender) rootUsed(warden, be, state string) (string, error) {
	out, err := output(warden, "run", "--backend", be, "--state-dir", state, "--template", c.template,
		"--", "python3", "-c", countProgram)
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, measure.Tail(out))
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return "", fmt.Errorf("reading the count from %q: %w", measure.Tail(out), err)
	}
	s, err := template.Open(filepath.Join(state, "templates"), template.Options{})
	if err != nil {
		return "", fmt.Errorf("opening the store: %w", err)
	}
	t, err := s.Get(c.template)
	if err != nil {
		return "", fmt.Errorf("reading template %s: %w", c.template, err)
	}
	tn, hn := entries(filepath.Join(t.Root, "usr/bin")), entries("/usr/bin")
	switch {
	case tn == hn:
		return "unverified", nil
	case n == tn:
		return "template", nil
	case n == hn:
		return "host", nil
	}
	return "unverified", nil
}

// entries is how many names directory dir holds (-1 when unreadable).
func entries(dir string) int {
	es, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	return len(es)
}
