package vmbox

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/microvm"
)

// TestGuestInitramfsFile: the initramfs is written once as a file named
// after its warden-init's identity, read-only to all and the same bytes
// as the in-memory archive; other builds' files are removed when a warden
// starts; a warden holds the file its first box opened, and when its
// name is removed under it (another build's warden starting), names it
// again from those bytes, not from warden-init, which may have changed; a
// warden that must write it from a warden-init rewritten in place
// refuses, rather than name other bytes after the old binary; and a
// write to the warden-init names a new file.
func TestGuestInitramfsFile(t *testing.T) {
	dir := t.TempDir()
	initPath := filepath.Join(t.TempDir(), "warden-init")
	if err := os.WriteFile(initPath, []byte("\x7fELF not really an init"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, initrdPrefix+"other")
	if err := os.WriteFile(other, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	g := mustGuestInit(t, initPath, dir)
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("another build's initramfs after a warden started: stat = %v, want it removed", err)
	}
	want, err := microvm.Initramfs(mustOpen(t, initPath))
	if err != nil {
		t.Fatal(err)
	}
	first := openInitrd(t, g, want)
	if named, err := os.Stat(g.name); err != nil || !os.SameFile(named, first) {
		t.Fatalf("the initramfs at its name = %v, %v; want the file the box got", named, err)
	}
	if got := openInitrd(t, g, want); !os.SameFile(got, first) {
		t.Error("a second box got another file, want the first box's")
	}

	again := mustGuestInit(t, initPath, dir)
	if err := os.Remove(g.name); err != nil {
		t.Fatal(err)
	}
	rewriteInPlace(t, initPath)
	openInitrd(t, g, want)
	if _, err := os.Stat(g.name); err != nil {
		t.Errorf("the initramfs's name after a box of the warden holding it: %v, want it named again", err)
	}

	// A warden of the old binary that had no box yet must write the
	// file from the rewritten binary: refused, and nothing is named.
	if err := os.Remove(g.name); err != nil {
		t.Fatal(err)
	}
	if f, err := again.open(); err == nil || !strings.Contains(err.Error(), "restart warden") {
		if f != nil {
			f.Close()
		}
		t.Errorf("open after warden-init was rewritten in place = %v, want a refusal saying to restart warden", err)
	}
	if _, err := os.Stat(again.name); !os.IsNotExist(err) {
		t.Errorf("the initramfs's name after the refusal: stat = %v, want nothing written", err)
	}
	if renamed := mustGuestInit(t, initPath, dir); renamed.name == g.name {
		t.Errorf("initramfs name after warden-init changed = %q, want another", renamed.name)
	}
}

// rewriteInPlace writes other bytes into the file at p, keeping its inode.
func rewriteInPlace(t *testing.T, p string) {
	t.Helper()
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("\x7fELF another init"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// mustGuestInit is a guestInit of the binary at initPath, its initramfs
// in dir, as openGuestInit makes at a warden's start.
func mustGuestInit(t *testing.T, initPath, dir string) *guestInit {
	t.Helper()
	g, err := newGuestInit(mustOpen(t, initPath), dir, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if g.initrd != nil {
			if err := g.initrd.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return g
}

// openInitrd opens g's initramfs and checks its bytes and mode.
func openInitrd(t *testing.T, g *guestInit, want []byte) os.FileInfo {
	t.Helper()
	f, err := g.open()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}()
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("initramfs file: %d bytes unlike Initramfs's %d", len(got), len(want))
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o444 {
		t.Errorf("initramfs mode = %v, want -r--r--r-- (QEMU reads it under its own uid)", st.Mode())
	}
	return st
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f
}
