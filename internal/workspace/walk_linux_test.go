package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// noOpenat2 makes openBeneath take walkBeneath, as in a native sandbox
// whose seccomp filter answers openat2 ENOSYS, until t ends.
func noOpenat2(t *testing.T) {
	t.Cleanup(func() { openat2 = unix.Openat2 })
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
}

// TestWalkBeneathLikeOpenat2: on hostile paths, openat2 with
// resolveFlags and the walk that stands in for it where openat2 is
// denied refuse alike (a symbolic link in the middle or at the end, a
// magic link through a /proc mounted in the tree, "..", an absolute
// path, a mount crossing); on honest paths both open the same file; a
// final link is opened itself by both only with O_PATH|O_NOFOLLOW. The
// one difference, a ".." that stays below, the walk refuses too.
func TestWalkBeneathLikeOpenat2(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/b", "mnt", "proc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "a/b/f"), "f", 0o644)
	symlink(t, "b", filepath.Join(dir, "a/mid"))
	symlink(t, "b/f", filepath.Join(dir, "a/end"))
	symlink(t, "/proc/self/root", filepath.Join(dir, "magic"))
	root := os.Geteuid() == 0
	if root {
		if err := unix.Mount("tmpfs", filepath.Join(dir, "mnt"), "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(filepath.Join(dir, "mnt"), unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting the test's mnt: %v", err)
			}
		})
		writeFile(t, filepath.Join(dir, "mnt/x"), "x", 0o644)
		if err := unix.Mount("/proc", filepath.Join(dir, "proc"), "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(filepath.Join(dir, "proc"), unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting the test's proc: %v", err)
			}
		})
	}
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	tests := []struct {
		path     string
		flags    int
		ok       bool
		needRoot bool
		walkOnly bool // refused by the walk alone: a ".." that stays below
	}{
		{"a/b/f", unix.O_RDONLY, true, false, false},
		{"./a//b/f", unix.O_RDONLY, true, false, false},
		{".", unix.O_RDONLY | unix.O_DIRECTORY, true, false, false},
		{"a/b", unix.O_PATH | unix.O_DIRECTORY, true, false, false},
		{"a/end", unix.O_PATH | unix.O_NOFOLLOW, true, false, false},
		{"a/mid/f", unix.O_RDONLY, false, false, false},
		{"a/mid/f", unix.O_PATH | unix.O_NOFOLLOW, false, false, false},
		{"a/end", unix.O_RDONLY, false, false, false},
		{"a/end", unix.O_PATH, false, false, false},
		{"a/mid", unix.O_PATH | unix.O_DIRECTORY, false, false, false},
		{"magic/etc/passwd", unix.O_RDONLY, false, false, false},
		{"magic", unix.O_RDONLY, false, false, false},
		{"..", unix.O_PATH | unix.O_DIRECTORY, false, false, false},
		{"../" + filepath.Base(dir) + "/a/b/f", unix.O_RDONLY, false, false, false},
		{"a/../../x", unix.O_RDONLY, false, false, false},
		{"/etc/passwd", unix.O_RDONLY, false, false, false},
		{"a/b/f/g", unix.O_RDONLY, false, false, false},
		{"a/b/f/", unix.O_RDONLY, false, false, false},
		{"a/b/", unix.O_RDONLY, true, false, false},
		{"", unix.O_PATH | unix.O_DIRECTORY, false, false, false},
		{"a/end/", unix.O_PATH | unix.O_NOFOLLOW, false, false, false},
		{"a/b/f", unix.O_WRONLY | unix.O_APPEND, true, false, false},
		{"a/b/../b/f", unix.O_RDONLY, true, false, true},
		{"mnt/x", unix.O_RDONLY, false, true, false},
		{"mnt", unix.O_PATH | unix.O_DIRECTORY, false, true, false},
		{"proc/self/root/etc/passwd", unix.O_RDONLY, false, true, false},
		{"proc/self/fd/0", unix.O_PATH | unix.O_NOFOLLOW, false, true, false},
	}
	for _, tt := range tests {
		if tt.needRoot && !root {
			continue
		}
		how := unix.OpenHow{Flags: uint64(tt.flags | unix.O_CLOEXEC), Resolve: resolveFlags}
		a, aerr := unix.Openat2(dirfd, tt.path, &how)
		w, werr := walkBeneath(dirfd, tt.path, tt.flags, 0)
		wantA, wantW := tt.ok, tt.ok && !tt.walkOnly
		if (aerr == nil) != wantA || (werr == nil) != wantW {
			t.Errorf("%q (flags %#x): openat2 %v, walk %v; want opened: openat2 %v, walk %v", tt.path, tt.flags, aerr, werr, wantA, wantW)
		}
		if aerr == nil && werr == nil && !sameFile(t, a, w) {
			t.Errorf("%q: openat2 and the walk opened different files", tt.path)
		}
		for _, fd := range []int{a, w} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}
	if !root {
		t.Log("without root, the mount-crossing rows did not run")
	}
}

// TestWalkOpensNothingAcrossMount: a file bind-mounted into the tree is
// refused by the walk before it is opened, as openat2's RESOLVE_NO_XDEV
// refuses it: O_TRUNC leaves it whole (the walk used to open the last
// component with the caller's flags and check its mount after).
func TestWalkOpensNothingAcrossMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount a file into the tree")
	}
	dir, src := t.TempDir(), filepath.Join(t.TempDir(), "src")
	writeFile(t, src, "1234", 0o644)
	writeFile(t, filepath.Join(dir, "f"), "", 0o644)
	if err := unix.Mount(src, filepath.Join(dir, "f"), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(filepath.Join(dir, "f"), unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's f: %v", err)
		}
	})
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	for _, flags := range []int{unix.O_WRONLY | unix.O_TRUNC, unix.O_RDWR | unix.O_TRUNC | unix.O_NONBLOCK} {
		fd, err := walkBeneath(dirfd, "f", flags, 0)
		if err == nil {
			unix.Close(fd)
		}
		if !errors.Is(err, unix.EXDEV) {
			t.Errorf("walk of a bind-mounted f (flags %#x): %v, want EXDEV", flags, err)
		}
		if fi, err := os.Stat(src); err != nil || fi.Size() != 4 {
			t.Fatalf("the mount's source after the walk's refusal (flags %#x): %v, %v; want 4 bytes", flags, fi.Size(), err)
		}
	}
	if fd, err := walkBeneath(dirfd, "f", unix.O_WRONLY|unix.O_CREAT, 0o600); !errors.Is(err, unix.EINVAL) {
		if err == nil {
			unix.Close(fd)
		}
		t.Errorf("walk with O_CREAT but no O_EXCL: %v, want EINVAL", err)
	}
}

// sameFile says fds a and b are the same inode.
func sameFile(t *testing.T, a, b int) bool {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// TestWorkspaceWithoutOpenat2 runs the file API's attack and behaviour
// tests with openat2 answering ENOSYS, as in a native sandbox (a boxed
// Pod's agent): the walk must refuse every planted link and special
// file and serve everything else as openat2 does.
func TestWorkspaceWithoutOpenat2(t *testing.T) {
	noOpenat2(t)
	for _, tt := range []struct {
		name string
		test func(*testing.T)
	}{
		{"PlantedSymlinks", TestPlantedSymlinks},
		{"PlantedHardLink", TestPlantedHardLink},
		{"SpecialFiles", TestSpecialFiles},
		{"WriteReadRoundTrip", TestWriteReadRoundTrip},
		{"WriteErrors", TestWriteErrors},
		{"ReadErrors", TestReadErrors},
		{"ListAndStat", TestListAndStat},
		{"Mkdir", TestMkdir},
		{"Remove", TestRemove},
		{"RemoveDeepTree", TestRemoveDeepTree},
		{"PermissionsOfTheSandboxUser", TestPermissionsOfTheSandboxUser},
		{"OpenErrors", TestOpenErrors},
		{"ReadOnlyWorkspace", TestReadOnlyWorkspace},
	} {
		t.Run(tt.name, tt.test)
	}
}
