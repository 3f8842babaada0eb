package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// viewDir is where the view's files are written, in the root tmpfs,
// before each is bound over its /proc entry; it is removed before
// pivot_root, the binds keeping the files.
const viewDir = ".view"

// buildView shows the sandbox its own world (see View): the ProcView
// files bound read-only over /proc's, and /sys/devices/system/cpu with
// the sandbox's CPUs. The files are written into the root tmpfs and
// unlinked once bound, rather than on a tmpfs of their own: unmounting
// that would wait for an RCU grace period in every sandbox start. The
// program cannot undo a bind: unmounting needs CAP_SYS_ADMIN in the
// sandbox's user namespace, which it never has, and its seccomp filter
// refuses umount anyway. The files are the sandbox user's (0444): it may
// chmod and rewrite its own copy, which lies to itself alone, and which
// saves a mount_setattr per file under the host-wide mount lock.
func buildView(pl *planner, root string, o Options) error {
	proc := "/proc"
	src, err := ReadViewSource(proc, o.View)
	if errors.Is(err, os.ErrNotExist) && pl.freshProc != "" {
		proc = pl.freshProc
		src, err = ReadViewSource(proc, o.View)
	}
	if err != nil {
		return err
	}
	if src.HostCgroups, err = os.ReadFile(filepath.Join(proc, "cgroups")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if src.BootID, err = randomID(); err != nil {
		return err
	}
	stage := filepath.Join(root, viewDir)
	pl.mkdir(stage, 0o755)
	bindView(pl, stage, filepath.Join(root, "proc"), ProcFiles(src))
	buildSysCPU(pl, root, o.View.CPUs)
	return nil
}

// ReadViewSource is what a sandbox's ProcView files other than cgroups
// and boot_id are made from when it starts with view v: the host's CPUs
// and memory read from proc (a mounted procfs) and the time now. The
// native root's plan reads the /proc warden sees and adds the other two;
// the Go init, applying it step by step, falls back to the sandbox's
// fresh procfs when that /proc lacks them (mounted subset=pid). The
// docker backend, whose init cannot mount, reads the host's and binds the
// files runc allows, which are not those two, at the container's
// creation.
func ReadViewSource(proc string, v View) (ViewSource, error) {
	src := ViewSource{View: v, BootTime: time.Now().Unix()}
	var err error
	if src.HostCPUInfo, err = os.ReadFile(filepath.Join(proc, "cpuinfo")); err != nil {
		return src, err
	}
	if src.HostMeminfo, err = os.ReadFile(filepath.Join(proc, "meminfo")); err != nil {
		return src, err
	}
	return src, nil
}

// bindView writes files into stage, binds each over proc (an entry the
// kernel lacks shows nothing to hide), and removes them from stage.
func bindView(pl *planner, stage, proc string, files map[string]string) {
	for i, f := range ProcView {
		src := filepath.Join(stage, strconv.Itoa(i))
		pl.writeFile(src, files[f.Name], 0o444)
		pl.mountOK(src, filepath.Join(proc, f.Name), "", unix.MS_BIND, "", unix.ENOENT)
	}
	for i := range ProcView {
		p := filepath.Join(stage, strconv.Itoa(i))
		pl.add(plan.Unlink, nil, []string{p}, "unlinkat "+p)
	}
	pl.add(plan.Rmdir, nil, []string{stage}, "unlinkat "+stage)
}

// buildSysCPU makes /sys/devices/system/cpu list n CPUs, all online: glibc
// reads it for sysconf(_SC_NPROCESSORS_ONLN) and _CONF (Python's
// os.cpu_count()). It lives in the root tmpfs, read-only once pivoted.
func buildSysCPU(pl *planner, root string, n int) {
	dir := root
	for _, d := range []string{"sys", "devices", "system", "cpu"} {
		dir = filepath.Join(dir, d)
		pl.mkdirOK(dir, 0o755, unix.EEXIST)
	}
	for i := range n {
		pl.mkdir(filepath.Join(dir, "cpu"+strconv.Itoa(i)), 0o755)
	}
	for _, f := range []string{"online", "possible", "present"} {
		pl.writeFile(filepath.Join(dir, f), CPURange(n), 0o444)
	}
}

// randomID is a random UUID (version 4), a boot_id of the sandbox's own.
func randomID() (string, error) {
	var b [16]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		return "", fmt.Errorf("getrandom: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
