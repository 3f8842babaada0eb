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
		var st, host unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, d), &st); err != nil || unix.Stat("/dev/"+d, &host) != nil || st.Rdev != host.Rdev || st.Mode != host.Mode {
			t.Errorf("%s: mode %o rdev %d, %v; want the host's mode %o rdev %d", d, st.Mode, st.Rdev, err, host.Mode, host.Rdev)
		}
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
	tmpl, err := SharedEtc(base, "box", true)
	if err != nil {
		t.Fatalf("SharedEtc: %v", err)
	}
	unmountAll(t, tmpl.Dir)
	if got, err := os.ReadFile(filepath.Join(tmpl.Dir, "hostname")); err != nil || string(got) != "box\n" {
		t.Errorf("hostname = %q, %v; want %q", got, err, "box\n")
	}
	if again, err := SharedEtc(base, "box", true); err != nil || again.Dir != tmpl.Dir {
		t.Errorf("second SharedEtc = %q, %v; want %q", again.Dir, err, tmpl.Dir)
	}
	if n := mountsAt(t, tmpl.Dir); n != 1 {
		t.Errorf("%d mounts on %s, want the template's own 1", n, tmpl.Dir)
	}
	if err := os.WriteFile(filepath.Join(tmpl.Dir, "hostname"), []byte("x\n"), 0o644); err == nil {
		t.Errorf("writing into the template succeeded; want a read-only mount")
	}
}
