package boxname

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestStaleDirs: a state directory's entries named after a dead Warden
// are stale, a live one's (this process's) and names Warden did not make
// are not, and RemoveDir removes what is listed.
func TestStaleDirs(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running true for a dead pid: %v", err)
	}
	dead, self := strconv.Itoa(cmd.Process.Pid), strconv.Itoa(os.Getpid())
	if Alive(cmd.Process.Pid) {
		t.Skipf("pid %s was reused already", dead)
	}
	dir := t.TempDir()
	names := map[string]bool{
		"box-" + Prefix + dead + "-ab": true,
		"tmp-" + dead:                  true,
		"template-" + dead:             true,
		"box-" + Prefix + self + "-ab": false,
		"tmp-" + self:                  false,
		"box-other-" + dead + "-ab":    false,
		"notes":                        false,
		"tmp-0":                        false,
		"template-00":                  false,
		"box-" + Prefix + "0-x":        false,
		"tmp-+4194305":                 false,
		"tmp--1":                       false,
		"tmp-" + dead + "-img":         true,
		"tmp-" + dead + "-gc-img-ab-1": true,
		"tmp-" + self + "-img":         false,
		"tmp-" + self + "-gc-img-ab-1": false,
		"tmp-0-img":                    false,
		"tmp--1-img":                   false,
		"tmp-x" + dead + "-img":        false,
	}
	var want []string
	for name, stale := range names {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if stale {
			want = append(want, filepath.Join(dir, name))
		}
	}
	got := StaleDirs(dir)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("StaleDirs = %q, want %q", got, want)
	}
	for _, d := range got {
		if err := RemoveDir(d); err != nil {
			t.Errorf("RemoveDir(%q): %v", d, err)
		}
	}
	if got := StaleDirs(dir); len(got) != 0 {
		t.Errorf("after RemoveDir, StaleDirs = %q, want none", got)
	}
}

// TestDirOwner: the pid of a state directory entry is read up to the
// first "-" after its prefix, so the shared roots being written
// (tmp-<pid>-img-…) or removed (tmp-<pid>-gc-img-…) are a Warden's too.
func TestDirOwner(t *testing.T) {
	tests := []struct {
		name   string
		want   int
		wantOK bool
	}{
		{"tmp-12", 12, true},
		{"tmp-12-img", 12, true},
		{"tmp-12-gc-img-" + strings.Repeat("a", 64) + "-1f", 12, true},
		{"template-7", 7, true},
		{"template-7-x", 7, true},
		{"box-" + Prefix + "9-ab", 9, true},
		{"tmp-", 0, false},
		{"tmp--img", 0, false},
		{"tmp-0-img", 0, false},
		{"tmp-012-img", 0, false},
		{"tmp-+12-img", 0, false},
		{"tmp-x12-img", 0, false},
		{"img-12-x", 0, false},
		{"box-" + Prefix + "x-ab", 0, false},
	}
	for _, tt := range tests {
		got, ok := dirOwner(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("dirOwner(%q) = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestMountPointsAt: the mount points at or below a directory, as
// mountinfo writes them (escaped), and not a sibling sharing its prefix.
func TestMountPointsAt(t *testing.T) {
	const info = `22 1 0:21 / / rw - ext4 /dev/root rw
30 22 0:40 / /var/lib/w/box-a rw - tmpfs tmpfs rw
31 30 0:41 / /var/lib/w/box-a/scratch rw - tmpfs tmpfs rw
32 22 0:42 / /var/lib/w/box-ab/scratch rw - tmpfs tmpfs rw
33 22 0:43 / /var/lib/w/my\040box/scratch rw - tmpfs tmpfs rw
`
	tests := []struct {
		dir  string
		want []string
	}{
		{"/var/lib/w/box-a", []string{"/var/lib/w/box-a", "/var/lib/w/box-a/scratch"}},
		{"/var/lib/w/box-ab", []string{"/var/lib/w/box-ab/scratch"}},
		{"/var/lib/w/my box", []string{`/var/lib/w/my\040box/scratch`}},
		{"/var/lib/w/box-b", nil},
	}
	for _, tt := range tests {
		if got := mountPointsAt(info, tt.dir); !slices.Equal(got, tt.want) {
			t.Errorf("mountPointsAt(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
}

// TestMountinfoEscapes: a path written as mountinfo writes it, and read
// back into the path for messages, a literal escape sequence included.
func TestMountinfoEscapes(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/w/box-a", "/w/box-a"},
		{"/w/a b", `/w/a\040b`},
		{"/w/a\tb\nc", `/w/a\011b\012c`},
		{`/w/a\b`, `/w/a\134b`},
		{`/w/a\040b`, `/w/a\134040b`},
		{"/w/é", "/w/é"},
	}
	for _, tt := range tests {
		got := mountinfoEscaper.Replace(tt.path)
		if got != tt.want {
			t.Errorf("mountinfoEscaper.Replace(%q) = %q, want %q", tt.path, got, tt.want)
		}
		if back := mountinfoUnescaper.Replace(got); back != tt.path {
			t.Errorf("mountinfoUnescaper.Replace(%q) = %q, want %q", got, back, tt.path)
		}
	}
}

// TestRemoveDirLeavesMounts: RemoveDir removes a box directory with its
// scratch mounted, or none, but never one in which something is still
// mounted (a scratch mounted twice, whose unmount leaves the lower one; a
// mount beside it): RemoveAll would delete the mount's files. Run in a
// mount namespace of the test's own.
func TestRemoveDirLeavesMounts(t *testing.T) {
	tests := []struct {
		name   string
		mounts []string // tmpfs mounted in turn, each holding a file "kept"
		suffix string   // added to the directory RemoveDir is given
		left   string   // the file RemoveDir must leave, "" for none
	}{
		{"no scratch", nil, "", ""},
		{"scratch mounted", []string{"scratch"}, "", ""},
		{"scratch mounted twice", []string{"scratch", "scratch"}, "", "scratch/kept"},
		{"a mount beside the scratch", []string{"scratch", "other"}, "", "other/kept"},
		{"a trailing slash", []string{"scratch", "other"}, "/", "other/kept"},
		{"two trailing slashes", []string{"scratch", "other"}, "//", "other/kept"},
		{"a trailing slash and dot", []string{"scratch", "other"}, "/.", "other/kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Through a link, as a state directory may be reached.
			link := filepath.Join(t.TempDir(), "state")
			if err := os.Symlink(t.TempDir(), link); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(link, "box-test")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "log"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := testhost.InMountNS(t, func() error {
				for _, m := range tt.mounts {
					if err := mountKept(filepath.Join(dir, m)); err != nil {
						return err
					}
				}
				rerr := RemoveDir(dir + tt.suffix)
				if tt.left == "" {
					if rerr != nil {
						return fmt.Errorf("RemoveDir() = %w, want nil", rerr)
					}
					_, err := os.Lstat(dir)
					if err == nil {
						return errors.New("after RemoveDir() the directory is still there, want it gone")
					}
					if !errors.Is(err, os.ErrNotExist) {
						return fmt.Errorf("after RemoveDir() the directory: %w, want it gone", err)
					}
					return nil
				}
				if rerr == nil {
					return errors.New("RemoveDir() = nil, want an error saying a mount is left")
				}
				if msg := rerr.Error(); !strings.Contains(msg, "still mounted") || !strings.Contains(msg, "umount -l") {
					return fmt.Errorf("RemoveDir() = %w, want an error saying a mount is left and how to unmount it", rerr)
				}
				if _, err := os.Stat(filepath.Join(dir, tt.left)); err != nil {
					return fmt.Errorf("RemoveDir() deleted through a mount: %w", err)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// mountKept mounts a small tmpfs at dir, made if need be, with a file
// "kept" in it.
func mountKept(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("warden-test", dir, "tmpfs", 0, "size=64k"); err != nil {
		return fmt.Errorf("mounting a tmpfs at %s: %w", dir, err)
	}
	return os.WriteFile(filepath.Join(dir, "kept"), []byte("x"), 0o600)
}
