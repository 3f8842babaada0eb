package initramfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// sample writes one archive with every kind of entry.
func sample(t *testing.T) []byte {
	t.Helper()
	host := filepath.Join(t.TempDir(), "host")
	if err := os.WriteFile(host, []byte("from the host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(host)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, err := range []error{
		w.Dir("dev", 0o755),
		w.CharDev("dev/console", 0o600, 5, 1),
		w.Dir("bin", 0o755),
		w.File("init", 0o755, []byte("#!/bin/sh\n")),
		w.FileFrom("bin/copied", 0o644, f),
		w.File("empty", 0o644, nil),
		w.Symlink("sbin", "bin"),
		w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestDeterministic(t *testing.T) {
	a, b := sample(t), sample(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same entries differ")
	}
	if len(a)%4 != 0 {
		t.Errorf("archive is %d bytes, not a multiple of 4", len(a))
	}
	if !bytes.HasPrefix(a, []byte("07070100000001000041ED000000000000000000000002")) {
		t.Errorf("first header = %q, want dev as inode 1, mode 040755, uid/gid 0, nlink 2", a[:46])
	}
	if !bytes.Contains(a, []byte("TRAILER!!!\x00")) {
		t.Error("no trailer")
	}
}

func TestNameErrors(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"", "must be 1-"},
		{"/abs", "is absolute"},
		{"a/../b", `".."`},
		{"./a", `"."`},
		{"a//b", "empty"},
		{"a/", "empty"},
		{"nul\x00", "NUL"},
		{"missing/child", "add the directory first"},
		{"file/child", "add the directory first"},
		{"file", "added twice"},
		{"TRAILER!!!", "end marker"},
		{strings.Repeat("a", MaxNameLen+1), "must be 1-"},
	}
	for _, tt := range tests {
		w := NewWriter(&bytes.Buffer{})
		if err := w.File("file", 0o644, nil); err != nil {
			t.Fatal(err)
		}
		err := w.File(tt.name, 0o644, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("File(%q) = %v, want an error containing %q", tt.name, err, tt.want)
		}
		if err2 := w.Close(); !errors.Is(err2, err) {
			t.Errorf("Close after a failed add = %v, want the sticky %v", err2, err)
		}
	}
}

func TestBadEntries(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	if err := w.File("f", 0o100644, nil); err == nil || !strings.Contains(err.Error(), "beyond permissions") {
		t.Errorf("a mode with type bits = %v, want refused", err)
	}
	w = NewWriter(&bytes.Buffer{})
	if err := w.Symlink("l", ""); err == nil {
		t.Error("an empty symlink target was accepted")
	}
	w = NewWriter(&bytes.Buffer{})
	if err := w.FileFrom("d", 0o644, mustOpen(t, t.TempDir())); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FileFrom a directory = %v, want refused", err)
	}
	w = NewWriter(&bytes.Buffer{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Dir("late", 0o755); err == nil {
		t.Error("an entry after Close was accepted")
	}
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestCpioReads has Debian's cpio list and unpack the archive: the
// reference reader agrees with the writer on names, types and contents.
func TestCpioReads(t *testing.T) {
	cpio := testhost.RequireTool(t, "cpio")
	archive := sample(t)
	cmd := exec.Command(cpio, "-it", "--quiet")
	cmd.Stdin = bytes.NewReader(archive)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -it: %v: %s", err, out)
	}
	want := "dev\ndev/console\nbin\ninit\nbin/copied\nempty\nsbin\n"
	if string(out) != want {
		t.Errorf("cpio -it listed %q, want %q", out, want)
	}
	dir := t.TempDir()
	cmd = exec.Command(cpio, "-id", "--quiet", "--no-absolute-filenames")
	cmd.Stdin, cmd.Dir = bytes.NewReader(archive), dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v: %s", err, out)
	}
	checkUnpacked(t, dir)
}

func checkUnpacked(t *testing.T, dir string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, "bin/copied")); err != nil || string(b) != "from the host\n" {
		t.Errorf("bin/copied = %q, %v; want the host file's contents", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "sbin")); err != nil || l != "bin" {
		t.Errorf("sbin -> %q, %v; want bin", l, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "init")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("init: %v, %v; want mode 0755", st, err)
	}
	if os.Geteuid() != 0 {
		return // only root can make the device node
	}
	if st, err := os.Stat(filepath.Join(dir, "dev/console")); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("dev/console: %v, %v; want a char device", st, err)
	}
}
