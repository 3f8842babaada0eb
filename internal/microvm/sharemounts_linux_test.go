package microvm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestParseMountinfo: mountinfo lines are parsed strictly, escapes undone.
func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n", "/proc proc", ""},
		{"30 22 0:40 / /srv/a\\040b rw - tmpfs tmpfs rw", "/srv/a b tmpfs", ""},
		{"22 1 0:21 / /proc rw - proc", "", "not a mountinfo line"},
		{"22 1 0:21 / /proc rw shared:5 proc proc rw", "", "not a mountinfo line"},
		{"22 1 0:21 / /a\\04 rw - proc proc rw", "", "bad mount point"},
		{"22 1 0:21 / /a\\999 rw - proc proc rw", "", "bad mount point"},
		{"22 1 0:21 / a rw - proc proc rw", "", "bad mount point"},
	} {
		ms, err := parseMountinfo(tc.in)
		got := ""
		if err == nil && len(ms) == 1 {
			got = ms[0].point + " " + ms[0].fstype
		}
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseMountinfo(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseMountinfo(%q) = %v, want an error saying %q", tc.in, err, tc.err)
		}
	}
}

// TestShareMountsRefused: a share holding a kernel filesystem's mount (a
// procfs mounted inside it, in a private test directory unmounted after)
// is refused in one line naming the share and the mount; its sibling,
// and a share holding only an ordinary mount, are not.
func TestShareMountsRefused(t *testing.T) {
	testhost.RequireRoot(t)
	top := t.TempDir()
	if err := unix.Mount("warden-test", top, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a test tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(top, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", top, err)
		}
	})
	if err := unix.Mount("", top, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making %s private: %v", top, err)
	}
	for _, d := range []string{"share/proc", "plain/tmp", "other"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mounts := []struct{ dir, fstype string }{{"share/proc", "proc"}, {"plain/tmp", "tmpfs"}}
	for _, m := range mounts {
		if err := unix.Mount(m.fstype, filepath.Join(top, m.dir), m.fstype, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			t.Fatalf("mounting %s at %s: %v", m.fstype, m.dir, err)
		}
	}
	ms, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(top, "share"), "holds a mount of proc at " + filepath.Join(top, "share/proc")},
		{filepath.Join(top, "share/proc"), "holds a mount of proc"},
		{top, "holds a mount of proc"},
		{filepath.Join(top, "plain"), ""},
		{filepath.Join(top, "other"), ""},
	} {
		err := checkShareMounts(tc.dir, ms)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkShareMounts(%s) = %v, want nil", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("checkShareMounts(%s) = %v, want one line saying %q", tc.dir, err, tc.want)
		}
	}
}
