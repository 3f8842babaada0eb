package microvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenGuestFile: the kernel and initrd are trusted as a binary would
// be, and readable by QEMU's uid.
func TestOpenGuestFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("k"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file("target", 0o644), link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"fine", file("ok", 0o644), ""},
		{"private", file("private", 0o600), "chmod o+r"},
		{"group-writable", file("gw", 0o664), "writable by group or others"},
		{"symlink", link, "symbolic link"},
		{"fifo", fifo, "not a regular file"},
	}
	for _, tt := range tests {
		f, err := openGuestFile(tt.path, "guest kernel")
		if err == nil {
			f.Close()
		}
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: openGuestFile = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}
