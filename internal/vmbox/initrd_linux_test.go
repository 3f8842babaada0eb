package vmbox

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/microvm"
)

// TestGuestInitramfsFile: the initramfs is written once as a file named
// after its warden-init's identity, read-only to all and the same bytes
// as the in-memory archive; a second box reuses it, other builds' files
// are removed, one removed under a warden is written again, and a write
// to the warden-init names a new file.
func TestGuestInitramfsFile(t *testing.T) {
	dir := t.TempDir()
	initPath := filepath.Join(t.TempDir(), "warden-init")
	if err := os.WriteFile(initPath, []byte("\x7fELF not really an init"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, initPath)
	name, err := initrdName(f)
	if err != nil {
		t.Fatal(err)
	}
	g := &guestInit{f: f, name: filepath.Join(dir, name)}
	other := filepath.Join(dir, initrdPrefix+"other")
	if err := os.WriteFile(other, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	want, err := microvm.Initramfs(mustOpen(t, initPath))
	if err != nil {
		t.Fatal(err)
	}
	first := openInitrd(t, g, want)
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("another build's initramfs after the write: stat = %v, want it removed", err)
	}
	if got := openInitrd(t, g, want); !os.SameFile(got, first) {
		t.Error("the second open wrote the initramfs again, want the first file reused")
	}
	if err := os.Remove(g.name); err != nil {
		t.Fatal(err)
	}
	openInitrd(t, g, want)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(initPath, later, later); err != nil {
		t.Fatal(err)
	}
	if renamed, err := initrdName(f); err != nil || renamed == name {
		t.Errorf("initrdName after the init changed = %q, %v; want a name other than %q", renamed, err, name)
	}
}

// openInitrd opens g's initramfs and checks its bytes and mode.
func openInitrd(t *testing.T, g *guestInit, want []byte) os.FileInfo {
	t.Helper()
	f, err := g.open(slog.Default())
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
