package testhost

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size (as the mount option takes it: "64k",
// "1m") in a fresh temporary directory, for a test that fills a file
// system or makes it read-only, and unmounts it when the test ends. It
// needs root (see RequireRoot).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("warden-test", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mounting a test tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes the file p until its file system is full, and fails t if
// 16 MiB did not fill it (Fill is for small test file systems).
func Fill(t testing.TB, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for range 1 << 12 {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
	t.Fatalf("writing %s: 16 MiB did not fill its file system", p)
}
