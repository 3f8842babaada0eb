package vmbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// deadPID is the pid of a process that has ended, or a skip.
func deadPID(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running true for a dead pid: %v", err)
	}
	if boxname.Alive(cmd.Process.Pid) {
		t.Skipf("pid %d was reused already", cmd.Process.Pid)
	}
	return strconv.Itoa(cmd.Process.Pid)
}

// TestRemoveStale: a dead Warden's box, its root and scratch still
// mounted, is unmounted and removed; a live Warden's (this process's) is
// left; and a dead one whose root cannot be unmounted (here a directory
// with a file, not a mount) is left whole rather than removed through.
func TestRemoveStale(t *testing.T) {
	dead, self := deadPID(t), strconv.Itoa(os.Getpid())
	state := t.TempDir()
	stale := filepath.Join(state, "box-"+boxname.Prefix+dead+"-aa")
	live := filepath.Join(state, "box-"+boxname.Prefix+self+"-bb")
	stuck := filepath.Join(state, "box-"+boxname.Prefix+dead+"-cc")
	keep := filepath.Join(stuck, "root", "keep")
	err := testhost.InMountNS(t, func() error {
		for _, d := range []string{stale, live} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			if err := rootfs.MountScratch(filepath.Join(d, "scratch"), 1<<20, 64, 0, 0); err != nil {
				return err
			}
			tmpl := rootfs.Template{Dir: t.TempDir()}
			if err := assembleRoot(tmpl, filepath.Join(d, "root")); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(filepath.Dir(keep), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(keep, nil, 0o600); err != nil {
			return err
		}
		(&Runtime{}).removeStale(state)
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return err
		}
		if strings.Contains(string(mi), stale) {
			t.Errorf("the dead Warden's box is still mounted:\n%s", mi)
		}
		if !strings.Contains(string(mi), live) {
			t.Errorf("the live Warden's box was unmounted:\n%s", mi)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s: %v, want the dead Warden's box removed", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("stat %s: %v, want the live Warden's box kept", live, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("stat %s: %v, want a box whose root did not unmount left whole", keep, err)
	}
}

// TestScratchPrivate: another host uid (nobody's) can neither list a
// box's workspace nor create a file in its scratch's 1777 tmp, through
// the box's directory or, were that searchable, the scratch's root.
func TestScratchPrivate(t *testing.T) {
	state := t.TempDir()
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &box{r: &Runtime{}, id: "test", dir: filepath.Join(state, "box-test")}
	err := testhost.InMountNS(t, func() error {
		scratch, err := b.makeScratch(spec.Limits{DiskBytes: 1 << 20})
		if err != nil {
			return err
		}
		defer b.cleanup()
		asNobody(t, "ls", filepath.Join(scratch, "workspace"))
		asNobody(t, "touch", filepath.Join(scratch, "tmp", "f"))
		if err := os.Chmod(b.dir, 0o711); err != nil {
			return err
		}
		asNobody(t, "ls", filepath.Join(scratch, "workspace"))
		asNobody(t, "touch", filepath.Join(scratch, "tmp", "f"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// asNobody runs name with arg as uid and gid 65534 and fails the test
// unless it is refused.
func asNobody(t *testing.T, name, arg string) {
	t.Helper()
	cmd := exec.Command(name, arg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("%s %s as uid 65534: %v %s, want permission denied", name, arg, err, out)
	}
}
