package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestCopyTree: CopyTree copies directories, files (holes kept), links as
// links, owners, permission bits and times; it skips FIFOs, clears
// set-id bits and merges into a directory already there.
func TestCopyTree(t *testing.T) {
	testhost.RequireRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	outside := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "a/b"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a/b/f"), []byte("hello"), 0o644))
	must(t, os.Chown(filepath.Join(src, "a/b/f"), sandboxID, sandboxID))
	must(t, os.WriteFile(filepath.Join(src, "suid"), []byte("x"), 0o755))
	must(t, os.Chmod(filepath.Join(src, "suid"), 0o4755|os.ModeSetgid))
	must(t, os.Symlink(outside, filepath.Join(src, "link")))
	must(t, unix.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	sparse, err := os.Create(filepath.Join(src, "sparse"))
	must(t, err)
	must(t, sparse.Truncate(64<<20))
	_, err = sparse.WriteAt([]byte("end"), 64<<20-3)
	must(t, err)
	must(t, sparse.Close())
	must(t, os.Mkdir(filepath.Join(dst, "a"), 0o700))

	got, err := CopyTree(context.Background(), src, dst, 1<<20)
	if err != nil {
		t.Fatalf("CopyTree() = %v", err)
	}
	if got.Skipped != 1 || got.Bytes < 5+1+3 || got.Bytes > 1<<20 {
		t.Errorf("CopyTree() = %+v, want 1 skipped and the data alone (9 bytes to a few pages), not the hole", got)
	}
	if data, err := os.ReadFile(filepath.Join(dst, "a/b/f")); err != nil || string(data) != "hello" {
		t.Errorf("a/b/f = %q, %v; want hello", data, err)
	}
	var st unix.Stat_t
	must(t, unix.Lstat(filepath.Join(dst, "a/b/f"), &st))
	if st.Uid != sandboxID || st.Mode&0o7777 != 0o644 {
		t.Errorf("a/b/f: uid %d mode %o, want %d and 644", st.Uid, st.Mode&0o7777, sandboxID)
	}
	must(t, unix.Lstat(filepath.Join(dst, "suid"), &st))
	if st.Mode&0o7777 != 0o755 {
		t.Errorf("suid: mode %o, want 755 (set-id bits cleared)", st.Mode&0o7777)
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != outside {
		t.Errorf("link = %q, %v; want a link to %q", target, err, outside)
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fifo: %v, want it skipped", err)
	}
	must(t, unix.Lstat(filepath.Join(dst, "sparse"), &st))
	if st.Size != 64<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse: size %d, %d bytes allocated; want %d with its hole kept", st.Size, st.Blocks*512, 64<<20)
	}
	var sst unix.Stat_t
	must(t, unix.Lstat(filepath.Join(src, "a/b"), &sst))
	must(t, unix.Lstat(filepath.Join(dst, "a/b"), &st))
	if st.Mtim.Sec != sst.Mtim.Sec {
		t.Errorf("a/b: mtime %d, want %d", st.Mtim.Sec, sst.Mtim.Sec)
	}
}

// TestCopyTreeRefuses: a file already in dst fails the copy in one line
// naming it and counting the other failures.
func TestCopyTreeRefuses(t *testing.T) {
	testhost.RequireRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	for _, name := range []string{"x", "y", "z"} {
		must(t, os.WriteFile(filepath.Join(src, name), nil, 0o644))
		must(t, os.WriteFile(filepath.Join(dst, name), nil, 0o644))
	}
	_, err := CopyTree(context.Background(), src, dst, 1<<20)
	if err == nil || !errors.Is(err, unix.EEXIST) || !strings.Contains(err.Error(), "(and 2 more failures)") || strings.Contains(err.Error(), "\n") {
		t.Errorf("CopyTree() over existing files = %v, want EEXIST, one line, and 2 more failures", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCopyTreeLimit: hard links to one file, each copied apart, stop the
// copy at maxBytes with ErrTooLarge.
func TestCopyTreeLimit(t *testing.T) {
	testhost.RequireRoot(t)
	src, dst := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "f"), make([]byte, 64<<10), 0o644))
	for i := range 32 {
		must(t, os.Link(filepath.Join(src, "f"), filepath.Join(src, fmt.Sprint("link", i))))
	}
	got, err := CopyTree(context.Background(), src, dst, 1<<20)
	if !errors.Is(err, ErrTooLarge) || got.Bytes > 1<<20 {
		t.Errorf("CopyTree() of 33 links to 64 KiB = %+v, %v; want ErrTooLarge within 1 MiB", got, err)
	}
}
