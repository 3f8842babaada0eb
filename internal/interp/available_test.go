package interp

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAvailableInRoot: a template's languages come from its own tree,
// its absolute links resolved inside it, never from the host's files.
func TestAvailableInRoot(t *testing.T) {
	root := t.TempDir()
	mk := func(p string, mode os.FileMode) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	// python3 through an absolute alternatives link, inside the root.
	mk("usr/bin/python3.11", 0o755)
	link("etc/alternatives/python3", "/usr/bin/python3.11")
	link("usr/bin/python3", "/etc/alternatives/python3")
	// node links to the host's /bin/sh by an absolute path the root lacks.
	link("usr/bin/node", "/bin/sh")
	// bash is a loop, and /bin -> usr/bin as usr-merged images have it.
	link("usr/bin/bash", "bash2")
	link("usr/bin/bash2", "bash")
	link("bin", "usr/bin")
	if got, want := Available(root), []string{"python"}; !slices.Equal(got, want) {
		t.Errorf("Available(root) = %v, want %v", got, want)
	}
	if err := os.Remove(filepath.Join(root, "usr/bin/bash")); err != nil {
		t.Fatal(err)
	}
	mk("usr/bin/bash", 0o644) // not executable
	if got, want := Available(root), []string{"python"}; !slices.Equal(got, want) {
		t.Errorf("Available(root) with a non-executable bash = %v, want %v", got, want)
	}
	if err := os.Chmod(filepath.Join(root, "usr/bin/bash"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Languages' order, not alphabetical: python comes before bash.
	if got, want := Available(root), []string{"python", "bash"}; !slices.Equal(got, want) {
		t.Errorf("Available(root) with bash = %v, want %v (Languages' order)", got, want)
	}
	if got := Available(t.TempDir()); len(got) != 0 {
		t.Errorf("Available(empty root) = %v, want none", got)
	}
}

// TestNewLooksInTheRoot: New refuses a language the template's root
// lacks even when the host has it.
func TestNewLooksInTheRoot(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err == nil && !slices.Contains(Available(""), "python") {
		t.Errorf("Available(host) = %v, want python: the host has /usr/bin/python3", Available(""))
	}
	if len(Available("")) == 0 {
		t.Skip("the host has no interpreter")
	}
	lang := Available("")[0]
	_, err := New(lang, &hostSpawner{}, nil, WithRoot(t.TempDir()))
	if err == nil {
		t.Fatalf("New(%q) on an empty template root: got nil, want it refused", lang)
	}
}
