package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

func TestHugeOption(t *testing.T) {
	tests := []struct {
		name, knob, want string
	}{
		{"kernel default", "always within_size advise [never] deny force\n", "huge=within_size"},
		{"within_size", "always [within_size] advise never deny force\n", "huge=within_size"},
		{"denied by the administrator", "always within_size advise never [deny] force\n", ""},
		{"forced", "always within_size advise never deny [force]\n", "huge=within_size"},
		{"no huge pages in the kernel", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			knob := filepath.Join(t.TempDir(), "shmem_enabled")
			if tt.knob != "" {
				if err := os.WriteFile(knob, []byte(tt.knob), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := hugeOption(knob); got != tt.want {
				t.Errorf("hugeOption(%q) = %q, want %q", tt.knob, got, tt.want)
			}
		})
	}
}

// hugePage is the size of a transparent huge page on tmpfs (PMD size on
// amd64 and arm64 with 4 KiB pages).
const hugePage = 2 << 20

// TestScratchDiskBound says huge pages change nothing of what --disk
// bounds for dense data: a scratch tmpfs and a plain tmpfs of the same
// size both take exactly that many bytes, whether the file grows by
// appends or was sized first (which gives it huge pages). A sparse file
// written here and there fills the scratch sooner, at worst one huge
// page per region touched, and then gets ENOSPC like any full disk.
func TestScratchDiskBound(t *testing.T) {
	testhost.RequireRoot(t)
	if ScratchHuge() == "" {
		testhost.SkipOrFail(t, "the kernel has no transparent huge pages for tmpfs (no "+shmemHugeKnob+" or it says deny)")
	}
	// The mounts and the mount table read are this thread's: another
	// test may leave other threads in a mount namespace of their own.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const size = 4 * hugePage
	plain, scratch := t.TempDir(), filepath.Join(t.TempDir(), "scratch")
	if err := MountTmpfs(plain, "0755", size, 64, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer detach(t, plain)
	if err := MountScratch(scratch, size, 64, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer detach(t, scratch)
	if !strings.Contains(mountOptions(t, scratch), ScratchHuge()) {
		t.Fatalf("the scratch at %s is mounted with %q, want %q among them", scratch, mountOptions(t, scratch), ScratchHuge())
	}
	for _, sized := range []bool{false, true} {
		for _, dir := range []string{plain, filepath.Join(scratch, "workspace")} {
			if got := fillDense(t, filepath.Join(dir, "dense"), sized); got != size {
				t.Errorf("dense writes (sized first: %v) into %s took %d bytes before ENOSPC, want %d", sized, dir, got, size)
			}
		}
	}
	const regions = 32 // a 64 MiB sparse file, one byte in each 2 MiB
	if got := fillSparse(t, filepath.Join(plain, "sparse"), regions); got != regions {
		t.Errorf("a sparse file on the plain tmpfs took %d one-byte regions, want all %d (4 KiB each)", got, regions)
	}
	got := fillSparse(t, filepath.Join(scratch, "workspace", "sparse"), regions)
	if got < size/hugePage || got > regions {
		t.Errorf("a sparse file on the scratch took %d one-byte regions, want %d (a huge page each) to %d", got, size/hugePage, regions)
	}
	t.Logf("a sparse writer touching one byte per 2 MiB got ENOSPC after %d regions on a %d MiB scratch (%d on a plain tmpfs)", got, size>>20, regions)
}

// detach unmounts the mount at dir, on the calling thread (see
// TestScratchDiskBound).
func detach(t *testing.T, dir string) {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Errorf("unmounting %s: %v", dir, err)
	}
}

// fillDense writes p, 64 KiB at a time, until its file system is full,
// having first given it twice the room's size if sized, and returns the
// bytes written. The file is removed at the end.
func fillDense(t *testing.T, p string, sized bool) int64 {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := errors.Join(f.Close(), os.Remove(p)); err != nil {
			t.Error(err)
		}
	}()
	if sized {
		if err := f.Truncate(8 * hugePage); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 64<<10)
	var n int64
	for range 8 * hugePage / len(buf) {
		m, err := f.Write(buf)
		n += int64(m)
		if errors.Is(err, unix.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("writing %s: %v", p, err)
		}
	}
	t.Fatalf("writing %s: %d bytes did not fill its file system", p, n)
	return n
}

// fillSparse sizes p to regions huge pages and writes one byte at the
// start of each until its file system is full, returning how many took.
func fillSparse(t *testing.T, p string, regions int) int {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := errors.Join(f.Close(), os.Remove(p)); err != nil {
			t.Error(err)
		}
	}()
	if err := f.Truncate(int64(regions) * hugePage); err != nil {
		t.Fatal(err)
	}
	for i := range regions {
		_, err := f.WriteAt([]byte{1}, int64(i)*hugePage)
		if errors.Is(err, unix.ENOSPC) {
			return i
		}
		if err != nil {
			t.Fatalf("writing %s at region %d: %v", p, i, err)
		}
	}
	return regions
}

// mountOptions is the super block options of the mount at dir in the
// calling thread's mount namespace.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return f[len(f)-1]
		}
	}
	t.Fatalf("no mount at %s", dir)
	return ""
}
