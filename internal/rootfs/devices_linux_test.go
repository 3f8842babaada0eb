package rootfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// unmountAll detaches every mount stacked on dir when the test ends.
func unmountAll(t *testing.T, dir string) {
	t.Cleanup(func() {
		for range 8 {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				return
			}
		}
	})
}

// mountsAt counts the mounts on dir in this process's mount table.
func mountsAt(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			n++
		}
	}
	return n
}

// mountRootField is the root field (the path within its file system) of the
// last mount on dir in this process's mount table.
func mountRootField(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	root := ""
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			root = f[3]
		}
	}
	return root
}

func TestSharedDevicesMountsOnce(t *testing.T) {
	testhost.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "dev")
	unmountAll(t, dir)
	for i := range 2 {
		got, err := SharedDevices(dir)
		if err != nil || got != dir {
			t.Fatalf("SharedDevices #%d = %q, %v; want %q", i+1, got, err, dir)
		}
	}
	if n := mountsAt(t, dir); n != 1 {
		t.Errorf("%d mounts on %s after two calls, want 1", n, dir)
	}
	for _, d := range Devices {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, d.Name), &st); err != nil || st.Mode != deviceMode || st.Rdev != unix.Mkdev(d.Major, d.Minor) {
			t.Errorf("%s: mode %o device %d:%d, %v; want mode %o device %d:%d", d.Name, st.Mode,
				unix.Major(st.Rdev), unix.Minor(st.Rdev), err, deviceMode, d.Major, d.Minor)
		}
	}
}

func TestSharedDevicesRefusesOtherNodes(t *testing.T) {
	testhost.RequireRoot(t)
	for _, tt := range []struct {
		name string
		mode uint32
		dev  uint64
	}{
		{"a block device", unix.S_IFBLK | 0o666, unix.Mkdev(1, 3)},
		{"another character device", unix.S_IFCHR | 0o666, unix.Mkdev(1, 1)},
		{"other permissions", unix.S_IFCHR | 0o777, unix.Mkdev(1, 3)},
		{"a regular file", unix.S_IFREG | 0o666, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dev")
			unmountAll(t, dir)
			if _, err := SharedDevices(dir); err != nil {
				t.Fatalf("SharedDevices: %v", err)
			}
			// A tmpfs on top, holding the right nodes but null replaced.
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
				t.Fatal(err)
			}
			for _, d := range Devices {
				mode, dev := uint32(deviceMode), unix.Mkdev(d.Major, d.Minor)
				if d.Name == "null" {
					mode, dev = tt.mode, tt.dev
				}
				if err := unix.Mknod(filepath.Join(dir, d.Name), mode, int(dev)); err != nil {
					t.Fatal(err)
				}
				if err := unix.Chmod(filepath.Join(dir, d.Name), mode&0o7777); err != nil {
					t.Fatal(err)
				}
			}
			if devicesIntact(dir) {
				t.Errorf("devicesIntact with null as %s (mode %o): got true, want false", tt.name, tt.mode)
			}
		})
	}
}

func TestSharedDevicesReplacesAForeignDirectory(t *testing.T) {
	testhost.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "dev")
	unmountAll(t, dir)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "null"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := SharedDevices(dir); err != nil {
		t.Fatalf("SharedDevices over a plain directory: %v", err)
	}
	if !devicesIntact(dir) {
		t.Errorf("%s is not the devices' own tmpfs after SharedDevices", dir)
	}
}

func TestSharedEtcOwnMountsShowNoHostPath(t *testing.T) {
	testhost.RequireRoot(t)
	base := filepath.Join(t.TempDir(), "etc")
	tmpl, err := SharedEtc(base, "box", true, nil)
	if err != nil {
		t.Fatalf("SharedEtc: %v", err)
	}
	unmountAll(t, tmpl.Dir)
	if got, err := os.ReadFile(filepath.Join(tmpl.Dir, "hostname")); err != nil || string(got) != "box\n" {
		t.Errorf("hostname = %q, %v; want %q", got, err, "box\n")
	}
	checked.mark("") // so the second call looks the mounted template over
	if again, err := SharedEtc(base, "box", true, nil); err != nil || again.Dir != tmpl.Dir {
		t.Errorf("second SharedEtc = %q, %v; want %q", again.Dir, err, tmpl.Dir)
	}
	if n := mountsAt(t, tmpl.Dir); n != 1 {
		t.Errorf("%d mounts on %s, want the template's own 1", n, tmpl.Dir)
	}
	if root := mountRootField(t, tmpl.Dir); root != "/" {
		t.Errorf("mountinfo root of %s = %q, want \"/\": a bind of it shows that path to the sandbox", tmpl.Dir, root)
	}
	if err := os.WriteFile(filepath.Join(tmpl.Dir, "hostname"), []byte("x\n"), 0o644); err == nil {
		t.Errorf("writing into the template succeeded; want a read-only mount")
	}
}
