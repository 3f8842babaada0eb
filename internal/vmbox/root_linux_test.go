package vmbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestAssembleRootPrivateReadOnly: on a host whose mounts are shared (as
// systemd makes them), the binds into a box's root do not appear in the
// template it binds, and a mount nested in a bound host directory is
// read-only in the box's root too.
func TestAssembleRootPrivateReadOnly(t *testing.T) {
	base := t.TempDir()
	err := testhost.InMountNS(t, func() error {
		if err := unix.Mount("t", base, "tmpfs", 0, ""); err != nil {
			return err
		}
		if err := unix.Mount("", base, "", unix.MS_SHARED, ""); err != nil {
			return err
		}
		tmpl := rootfs.Template{Dir: filepath.Join(base, "tmpl"), From: filepath.Join(base, "host"), Binds: []string{"usr"}}
		nested := filepath.Join(base, "host", "usr", "nested")
		for _, d := range []string{filepath.Join(tmpl.Dir, "usr"), nested} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := unix.Mount("n", nested, "tmpfs", 0, ""); err != nil {
			return err
		}
		root := filepath.Join(base, "root")
		if err := assembleRoot(tmpl, root); err != nil {
			return err
		}
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return err
		}
		if strings.Contains(string(mi), " "+filepath.Join(tmpl.Dir, "usr")+" ") {
			t.Errorf("the bind into the box's root appeared in the template:\n%s", mi)
		}
		for _, p := range []string{filepath.Join(root, "usr", "nested", "f"), filepath.Join(root, "f")} {
			f, err := os.Create(p)
			if err == nil {
				f.Close()
			}
			if !errors.Is(err, unix.EROFS) {
				t.Errorf("creating %s: %v, want EROFS", p, err)
			}
		}
		return unmountRoot(root)
	})
	if err != nil {
		t.Fatal(err)
	}
}
