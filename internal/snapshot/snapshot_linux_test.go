package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/workspace"
)

// openWS opens dir as a workspace, acting as this process's user.
func openWS(t *testing.T, dir string, lim Limits) *workspace.Dir {
	t.Helper()
	d, err := workspace.Open(dir, os.Getuid(), os.Getgid(), WorkspaceLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mustWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// begins are the two ways a snapshot is begun: each Capture test runs
// on both.
var begins = []struct {
	name  string
	begin func(*Store) (*Pending, error)
}{
	{"durable", (*Store).Begin},
	{"temporary", (*Store).BeginTemporary},
}

// TestCaptureHostile: what a hostile sandbox plants in its workspace is
// never followed or copied as such: links, hard links, FIFOs are skipped
// and counted, setuid bits are dropped, regular files and directories
// come back through a restore, in a durable snapshot as in a temporary
// one.
func TestCaptureHostile(t *testing.T) {
	for _, b := range begins {
		t.Run(b.name, func(t *testing.T) { testCaptureHostile(t, b.begin) })
	}
}

func testCaptureHostile(t *testing.T, begin func(*Store) (*Pending, error)) {
	src := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	mustWrite(t, outside, "host secret", 0o644)
	mustWrite(t, filepath.Join(src, "a", "b.txt"), "plain", 0o640)
	mustWrite(t, filepath.Join(src, "suid"), "x", 0o4755)
	if err := os.Symlink(outside, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(src, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(src, "hard")); err != nil {
		t.Skipf("no hard link across temp dirs here: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 100}
	p, err := begin(store)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Capture(context.Background(), openWS(t, src, lim), lim)
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if want := (Stats{Files: 2, Dirs: 1, Bytes: 6, Skipped: 4}); st != want {
		t.Errorf("Capture stats: got %+v, want %+v", st, want)
	}
	dst := t.TempDir()
	if _, err := store.Restore(context.Background(), p.Name(), openWS(t, dst, lim), lim); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a", "b.txt")); err != nil || string(b) != "plain" {
		t.Errorf("restored a/b.txt: %q, %v; want %q", b, err, "plain")
	}
	fi, err := os.Stat(filepath.Join(dst, "suid"))
	if err != nil || fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("restored suid: %v, %v; want 0755 without setuid", fi.Mode(), err)
	}
	for _, name := range []string{"link", "dirlink", "hard", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was restored (%v); want it skipped", name, err)
		}
	}
}

func TestCaptureBounds(t *testing.T) {
	for _, b := range begins {
		t.Run(b.name, func(t *testing.T) { testCaptureBounds(t, b.begin) })
	}
}

func testCaptureBounds(t *testing.T, begin func(*Store) (*Pending, error)) {
	for _, tc := range []struct {
		name string
		lim  Limits
		want string
	}{
		{"bytes", Limits{MaxBytes: 10, MaxEntries: 100}, "disk limit"},
		{"entries", Limits{MaxBytes: 1 << 20, MaxEntries: 3}, "inode limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			for _, n := range []string{"a", "b", "c", "d"} {
				mustWrite(t, filepath.Join(src, n), "0123456789", 0o644)
			}
			store, err := Open(filepath.Join(t.TempDir(), "snaps"))
			if err != nil {
				t.Fatal(err)
			}
			p, err := begin(store)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Capture(context.Background(), openWS(t, src, tc.lim), tc.lim)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Capture over the %s bound: got %v, want ErrTooLarge naming the %s", tc.name, err, tc.want)
			}
			if err := p.Abort(); err != nil {
				t.Fatal(err)
			}
			if n, err := store.Sweep(nil); err != nil || n != 0 {
				t.Errorf("Sweep after Abort: %d, %v; want nothing left", n, err)
			}
		})
	}
}

func TestSweep(t *testing.T) {
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for range 2 {
		p, err := store.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name())
	}
	if _, err := store.Begin(); err != nil { // cut short by a "crash"
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(store.Path(), "not-ours"), 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := store.Sweep(map[string]bool{names[0]: true})
	if err != nil || n != 2 {
		t.Errorf("Sweep: removed %d, %v; want the unowned snapshot and the unfinished one", n, err)
	}
	if !store.Has(names[0]) || store.Has(names[1]) {
		t.Errorf("after Sweep: has kept %v, has unowned %v; want true, false", store.Has(names[0]), store.Has(names[1]))
	}
	if _, err := os.Stat(filepath.Join(store.Path(), "not-ours")); err != nil {
		t.Errorf("Sweep removed a directory that is not a snapshot: %v", err)
	}
}

// TestDirectoryModesRoundTrip: a restore gives each directory the
// group's and others' bits it had when captured, and the owner rwx
// (what the snapshot keeps so that it can be filled and read back);
// set-id and sticky bits are dropped. The server's umask changes none.
func TestDirectoryModesRoundTrip(t *testing.T) {
	tests := []struct {
		name       string
		mode, want os.FileMode
	}{
		{"private", 0o700, 0o700},
		{"shared", 0o777, 0o777},
		{"group only", 0o750, 0o750},
		{"others only", 0o705, 0o705},
		{"owner read-only", 0o555, 0o755},
		{"setgid", 0o2775 | os.ModeSetgid, 0o775},
		{"sticky", 0o1777 | os.ModeSticky, 0o777},
	}
	src := t.TempDir()
	for _, tt := range tests {
		p := filepath.Join(src, strings.ReplaceAll(tt.name, " ", "-"))
		mustWrite(t, filepath.Join(p, "f"), "x", 0o644)
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 100}
	p, err := store.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Capture(context.Background(), openWS(t, src, lim), lim); err != nil {
		t.Fatalf("Capture: %v", err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, err := store.Restore(context.Background(), p.Name(), openWS(t, dst, lim), lim); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for _, tt := range tests {
		fi, err := os.Stat(filepath.Join(dst, strings.ReplaceAll(tt.name, " ", "-")))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := fi.Mode() &^ os.ModeDir; got != tt.want {
			t.Errorf("%s: a directory of mode %v was restored as %v, want %v", tt.name, tt.mode, got, tt.want)
		}
	}
}

// TestMemoryDirectory: a snapshot's memory directory (MemoryPath, the
// backend's) is committed with it, found by name, dropped with it, and
// swept with it or when a crash left it alone or half made.
func TestMemoryDirectory(t *testing.T) {
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	withMemory := func() string {
		t.Helper()
		p, err := store.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if err := os.MkdirAll(filepath.Join(p.MemoryPath(), "scratch"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.MemoryPath(), "checkpoint.img"), []byte("image"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/passwd", filepath.Join(p.MemoryPath(), "scratch", "link")); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitMemory(); err != nil {
			t.Fatalf("CommitMemory: %v", err)
		}
		return p.Name()
	}
	kept, dropped, swept := withMemory(), withMemory(), withMemory()
	if store.MemoryPath(kept) == "" || store.MemoryPath("snap_"+strings.Repeat("0", 24)) != "" || store.MemoryPath("../x") != "" {
		t.Errorf("MemoryPath: %q for a snapshot with memory; want it, and \"\" for one missing or a bad name", store.MemoryPath(kept))
	}
	if err := store.Drop(dropped); err != nil || store.MemoryPath(dropped) != "" || store.Has(dropped) {
		t.Errorf("Drop: %v; memory %q, has %v; want both gone", err, store.MemoryPath(dropped), store.Has(dropped))
	}
	p, err := store.Begin() // cut short by a "crash" after the save
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p.MemoryPath(), 0o700); err != nil {
		t.Fatal(err)
	}
	// A crash between the memory's rename and the record, its snapshot
	// since removed.
	orphan := "snap_" + strings.Repeat("ab", 12) + memorySuffix
	if err := os.Mkdir(filepath.Join(store.Path(), orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := store.Sweep(map[string]bool{kept: true})
	if err != nil || n != 5 {
		t.Errorf("Sweep: removed %d, %v; want 5 (a snapshot and its memory, an unfinished one and its memory, an orphan memory)", n, err)
	}
	if store.MemoryPath(kept) == "" || store.MemoryPath(swept) != "" {
		t.Errorf("after Sweep: kept memory %q, swept memory %q; want the kept one only", store.MemoryPath(kept), store.MemoryPath(swept))
	}
}

// TestCommitMemoryFailureKeepsFiles: a memory directory that cannot be
// committed (here its place is taken) is removed, and the snapshot's
// files, committed before it, stay: the snapshot is one of files only.
func TestCommitMemoryFailureKeepsFiles(t *testing.T) {
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := store.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p.MemoryPath(), 0o700); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(store.Path(), p.Name()+memorySuffix, "not ours")
	if err := os.MkdirAll(taken, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitMemory(); err == nil {
		t.Fatal("CommitMemory over a taken place: nil, want an error")
	}
	if _, err := os.Lstat(p.MemoryPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the uncommitted memory is still there (%v)", err)
	}
	if _, err := os.Lstat(taken); err != nil {
		t.Errorf("what held the memory's place was removed: %v", err)
	}
	if !store.Has(p.Name()) {
		t.Error("the snapshot's files went with its memory")
	}
}

// TestRoom: a write larger than the disk's free space beyond its reserve
// is refused as a full disk; a small one is not.
func TestRoom(t *testing.T) {
	store, err := Open(filepath.Join(t.TempDir(), "snaps"))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Room(1 << 62); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Room(4 EiB) = %v, want ENOSPC", err)
	}
	if err := store.Room(1); err != nil {
		t.Errorf("Room(1) = %v, want nil", err)
	}
}
