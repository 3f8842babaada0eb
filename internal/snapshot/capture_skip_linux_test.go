package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// nobody is the sandbox user of these tests: root's fsuid would read a
// mode 000 directory all the same.
const nobody = 65534

// nobodyWS makes a workspace owned by nobody and opens it as nobody.
func nobodyWS(t *testing.T, lim Limits) (string, *workspace.Dir) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(src, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	d, err := workspace.Open(src, nobody, nobody, WorkspaceLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return src, d
}

// nest makes depth directories of 250-byte names under dir, a path
// longer than PATH_MAX, through descriptors as no path could.
func nest(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("d", 250)
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
}

func begin(t *testing.T) (*Store, *Pending) {
	t.Helper()
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := store.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return store, p
}

// TestCaptureSkipsUnreadable: a directory the sandbox user may not list
// and paths over MaxPath are skipped and counted, not a failure of every
// snapshot; the rest is copied.
func TestCaptureSkipsUnreadable(t *testing.T) {
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 1000}
	src, ws := nobodyWS(t, lim)
	mustWrite(t, filepath.Join(src, "locked", "secret"), "x", 0o644)
	mustWrite(t, filepath.Join(src, "keep"), "data", 0o644)
	if err := os.Chmod(filepath.Join(src, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	nest(t, src, 20)
	store, p := begin(t)
	st, err := p.Capture(context.Background(), ws, lim)
	if err != nil {
		t.Fatalf("Capture() = %v; want the unreadable parts skipped", err)
	}
	if st.Skipped != 2 || st.Files != 1 {
		t.Errorf("Capture() stats = %+v; want 2 skipped (the locked directory, the long path) and 1 file", st)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(store.Path(), p.Name(), "keep"))
	if err != nil || string(got) != "data" {
		t.Errorf("keep in the snapshot = %q, %v; want %q", got, err, "data")
	}
}

// TestCaptureSparseOverDisk: a sparse file over the disk limit is
// ErrTooLarge (which a front end answers as the workspace's fault).
func TestCaptureSparseOverDisk(t *testing.T) {
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 1000}
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Truncate(1<<30), f.Close()); err != nil {
		t.Fatal(err)
	}
	_, p := begin(t)
	if _, err := p.Capture(context.Background(), openWS(t, src, lim), lim); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Capture() of a 1 GiB sparse file under a 1 MiB limit = %v; want ErrTooLarge", err)
	}
}

// TestCopyStopsOnContext: a cancelled context stops Capture and Restore
// at the next entry.
func TestCopyStopsOnContext(t *testing.T) {
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 1000}
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "a"), "a", 0o644)
	store, p := begin(t)
	if _, err := p.Capture(context.Background(), openWS(t, src, lim), lim); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, p2 := begin(t)
	if _, err := p2.Capture(ctx, openWS(t, src, lim), lim); !errors.Is(err, context.Canceled) {
		t.Errorf("Capture() with a cancelled context = %v; want context.Canceled", err)
	}
	if _, err := store.Restore(ctx, p.Name(), openWS(t, t.TempDir(), lim), lim); !errors.Is(err, context.Canceled) {
		t.Errorf("Restore() with a cancelled context = %v; want context.Canceled", err)
	}
}

// TestCaptureSkipsLeased: a file a sandbox process holds a write lease on
// (fcntl F_SETLEASE) is skipped and counted at once, not waited on for the
// lease-break time (45 s by default) while the copy holds its slot. The
// wait is bounded far below that, so a broken Read fails the test.
func TestCaptureSkipsLeased(t *testing.T) {
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 1000}
	src, ws := nobodyWS(t, lim)
	mustWrite(t, filepath.Join(src, "leased"), "x", 0o644)
	mustWrite(t, filepath.Join(src, "keep"), "data", 0o644)
	holder, err := os.OpenFile(filepath.Join(src, "leased"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := unix.FcntlInt(holder.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		testhost.SkipOrFail(t, "taking a write lease (fcntl F_SETLEASE): "+err.Error()+"; is fs.leases-enable 0?")
	}
	_, p := begin(t)
	type result struct {
		st  Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := p.Capture(context.Background(), ws, lim)
		done <- result{st, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || r.st.Skipped != 1 || r.st.Files != 1 {
			t.Errorf("Capture() with a leased file = %+v, %v; want it skipped, 1 file copied", r.st, r.err)
		}
	case <-time.After(10 * time.Second):
		holder.Close() // breaks the lease, so the blocked Capture returns
		t.Fatal("Capture() still waits on a leased file after 10s; it must skip it at once")
	}
}
