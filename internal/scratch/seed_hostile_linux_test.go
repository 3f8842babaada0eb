package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// hostileScratch mounts a scratch as the backends do (rootfs.MountScratch:
// a tmpfs of size bytes and inodes inodes) and a tmpfs for the template's
// tree, both removed when the test ends.
func hostileScratch(t *testing.T, size, inodes int64) (dir, root string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a scratch tmpfs needs root")
	}
	dir, root = filepath.Join(t.TempDir(), "scratch"), t.TempDir()
	if err := rootfs.MountTmpfs(root, "0755", 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting the tree: %v", err)
		}
	})
	if err := rootfs.MountScratch(dir, size, inodes, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rootfs.UnmountScratch(dir); err != nil {
			t.Errorf("unmounting the scratch: %v", err)
		}
	})
	return dir, root
}

// TestSeedHostile seeds a scratch from templates whose home a hostile
// image made: nothing of the host is read, no special file is opened or
// made, and the copy stops at the scratch's limits with ErrNoSpace.
func TestSeedHostile(t *testing.T) {
	home := func(root string) string { return filepath.Join(root, "home/sandbox") }
	tests := []struct {
		name    string
		make    func(t *testing.T, root string)
		wantErr error
		check   func(t *testing.T, dir string)
	}{
		{"a link to /etc/shadow stays a link", func(t *testing.T, root string) {
			write(t, root, map[string]string{"home/sandbox/shadow": "->/etc/shadow", "home/sandbox/up": "->../../../etc"})
		}, nil, func(t *testing.T, dir string) {
			for name, want := range map[string]string{"shadow": "/etc/shadow", "up": "../../../etc"} {
				if got, err := os.Readlink(filepath.Join(dir, "home", name)); err != nil || got != want {
					t.Errorf("home/%s: got link %q (%v), want %q", name, got, err, want)
				}
			}
		}},
		{"a link loop is copied, not walked", func(t *testing.T, root string) {
			write(t, root, map[string]string{"home/sandbox/a": "->b", "home/sandbox/b": "->a", "home/sandbox/self": "->."})
		}, nil, func(t *testing.T, dir string) {
			if got, err := os.Readlink(filepath.Join(dir, "home/self")); err != nil || got != "." {
				t.Errorf("home/self: got %q (%v), want a link to .", got, err)
			}
		}},
		{"a home that links to ../etc is refused", func(t *testing.T, root string) {
			write(t, root, map[string]string{"etc/shadow": "secret", "home/sandbox": "->../etc"})
		}, ErrLinkedPlace, noneCopied},
		{"a home under a linked /home is refused", func(t *testing.T, root string) {
			write(t, root, map[string]string{"etc/sandbox/shadow": "secret", "home": "->etc"})
		}, ErrLinkedPlace, noneCopied},
		{"a workspace that links to etc is refused", func(t *testing.T, root string) {
			write(t, root, map[string]string{"etc/shadow": "secret", "workspace": "->etc"})
		}, ErrLinkedPlace, noneCopied},
		{"a fifo and a device are skipped without opening", func(t *testing.T, root string) {
			write(t, root, map[string]string{"home/sandbox/x": "x"})
			if err := unix.Mkfifo(filepath.Join(home(root), "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mknod(filepath.Join(home(root), "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Fatal(err)
			}
		}, nil, func(t *testing.T, dir string) {
			for _, name := range []string{"fifo", "null"} {
				if _, err := os.Lstat(filepath.Join(dir, "home", name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("home/%s: got %v, want it skipped", name, err)
				}
			}
		}},
		{"set-id bits are dropped", func(t *testing.T, root string) {
			write(t, root, map[string]string{"home/sandbox/suid": "#!/bin/sh\n", "home/sandbox/sgid/": ""})
			if err := os.Chmod(filepath.Join(home(root), "suid"), 0o4755|os.ModeSetuid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(home(root), "sgid"), 0o755|os.ModeSetgid); err != nil {
				t.Fatal(err)
			}
		}, nil, func(t *testing.T, dir string) {
			for _, name := range []string{"suid", "sgid"} {
				fi, err := os.Lstat(filepath.Join(dir, "home", name))
				if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("home/%s: got mode %v (%v), want no set-id bit", name, fi.Mode(), err)
				}
			}
		}},
		{"a huge sparse file is refused at the byte cap, before any copy", func(t *testing.T, root string) {
			write(t, root, map[string]string{"home/sandbox/sparse": ""})
			if err := os.Truncate(filepath.Join(home(root), "sparse"), 1<<40); err != nil {
				t.Fatal(err)
			}
		}, ErrSeedTooLarge, noneCopied},
		{"a sparse file under the cap stops at the disk limit", func(t *testing.T, root string) {
			write(t, root, map[string]string{"home/sandbox/sparse": ""})
			if err := os.Truncate(filepath.Join(home(root), "sparse"), 8<<20); err != nil {
				t.Fatal(err)
			}
		}, ErrNoSpace, nil},
		{"more files than the entry cap are refused before any copy", func(t *testing.T, root string) {
			files(t, home(root), MaxSeedEntries/100+1, 100)
		}, ErrSeedTooLarge, noneCopied},
		{"2000 files stop at the inode limit (1000)", func(t *testing.T, root string) {
			files(t, home(root), 20, 100)
		}, ErrNoSpace, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, root := hostileScratch(t, 4<<20, 1000)
			tt.make(t, root)
			err := Seed(dir, root, Kept)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("Seed: got %v, want %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, dir)
			}
		})
	}
}

// noneCopied fails t if any file reached the scratch at dir's home or
// /workspace: a refused seed copies nothing.
func noneCopied(t *testing.T, dir string) {
	t.Helper()
	for _, name := range Kept {
		entries, err := os.ReadDir(filepath.Join(dir, name))
		if err != nil || len(entries) != 0 {
			t.Errorf("%s: got %d entries (%v), want none copied", name, len(entries), err)
		}
	}
}

// files makes dirs directories of n empty files each under dir.
func files(t *testing.T, dir string, dirs, n int) {
	t.Helper()
	for d := range dirs {
		p := filepath.Join(dir, fmt.Sprint(d))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range n {
			if err := os.WriteFile(filepath.Join(p, fmt.Sprint(f)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSeedSlow seeds past the copy's deadline: the seed fails as the
// seed (ErrSeedSlow), not as a program timing out.
func TestSeedSlow(t *testing.T) {
	dir, root := hostileScratch(t, 4<<20, 1000)
	write(t, root, map[string]string{"home/sandbox/a": "a", "home/sandbox/b": "b"})
	if err := seedWithin(dir, root, Kept, -time.Second); !errors.Is(err, ErrSeedSlow) {
		t.Fatalf("seedWithin past its deadline: got %v, want %v", err, ErrSeedSlow)
	}
}
