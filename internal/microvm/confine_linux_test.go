package microvm

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// checkRoot reads what a running QEMU sees: only its root's mounts, all
// read-only (the tmpfs root, the binds rootBinds lists, the shares), the
// guest kernel bound from the file the host opened, none of the host's
// files (root, reading, sees every process in QEMU's /proc: checkProc
// lists it as QEMU's uid), and two seccomp filters (Warden's, then
// QEMU's own).
func checkRoot(t *testing.T, vm *VM, kernel string, shares []Share) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(vm.Pid())
	mounts := readMountinfo(t, dir+"/mountinfo")
	var points []string
	for mp := range mounts {
		points = append(points, mp)
	}
	slices.Sort(points)
	t.Logf("QEMU's mounts: %s", strings.Join(points, " "))
	binds := rootBinds(vm.Accel().Accel, libDirs(), false, shares)
	want := map[string]bool{"/": false, qemuProc: false}
	for _, b := range binds {
		want[b.Dst] = b.Writable
	}
	for mp, m := range mounts {
		writable, ok := want[mp]
		if !ok {
			t.Errorf("QEMU sees mount %s (%s), which its root does not bind", mp, m.line)
			continue
		}
		if m.ro == writable || !m.nosuid {
			t.Errorf("QEMU's mount %s: %s, want nosuid and read-only = %v", mp, m.line, !writable)
		}
	}
	for mp := range want {
		if _, ok := mounts[mp]; !ok {
			t.Errorf("QEMU's root lacks the mount %s", mp)
		}
	}
	if m := mounts["/"]; m.fstype != "tmpfs" {
		t.Errorf("QEMU's root is %q, want its own tmpfs", m.line)
	}
	for _, hidden := range []string{"/etc/shadow", "/root", "/proc/sys", "/proc/cpuinfo", "/sys", "/home", "/var", "/tmp", "/dev/shm", "/run"} {
		if holdsShare(hidden, shares) {
			continue // a share's parent directory, holding only the way to it
		}
		if _, err := os.Lstat(dir + "/root" + hidden); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("QEMU sees the host's %s: %v", hidden, err)
		}
	}
	sameFile(t, dir+"/root"+guestKernel, kernel)
	checkProc(t, vm, mounts[qemuProc])
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if n := statusField(string(status), "Seccomp_filters:"); n < 2 {
		t.Errorf("QEMU has %d seccomp filters, want Warden's and QEMU's own", n)
	}
}

// checkProc: QEMU's /proc is a procfs with qemuProcOpts, read-only,
// nosuid, nodev and noexec, and a process of QEMU's uid (a shell that
// execs ls) sees in it only QEMU, itself, self and thread-self.
func checkProc(t *testing.T, vm *VM, m mountLine) {
	t.Helper()
	for _, want := range []string{"noexec", "nodev", qemuProcOpts} {
		if !strings.Contains(m.line, want) || m.fstype != "proc" || !m.ro || !m.nosuid {
			t.Errorf("QEMU's /proc: %q, want a read-only, nosuid procfs with %s", m.line, want)
		}
	}
	cmd := exec.Command("/bin/sh", "-c", `echo $$; exec ls -1 "$1"`, "sh", "/proc/"+strconv.Itoa(vm.Pid())+"/root"+qemuProc)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(vm.id.ID()), Gid: uint32(vm.id.ID()), Groups: []uint32{}}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("listing QEMU's /proc as QEMU's uid: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatalf("listing QEMU's /proc printed nothing")
	}
	got := lines[1:]
	slices.Sort(got)
	want := []string{strconv.Itoa(vm.Pid()), lines[0], "self", "thread-self"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("QEMU's /proc as QEMU's uid holds %v, want %v (QEMU, the lister, self, thread-self)", got, want)
	}
}

// holdsShare says whether dir is a parent of a share's directory.
func holdsShare(dir string, shares []Share) bool {
	for _, s := range shares {
		if strings.HasPrefix(s.Dir, dir+"/") {
			return true
		}
	}
	return false
}

type mountLine struct {
	line       string
	fstype     string
	ro, nosuid bool
}

// readMountinfo maps each mount point in a mountinfo file to its line.
func readMountinfo(t *testing.T, p string) map[string]mountLine {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms := map[string]mountLine{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 6 || sep < 0 || sep+1 >= len(fields) {
			t.Fatalf("mountinfo line %q", sc.Text())
		}
		opts := "," + fields[5] + ","
		ms[fields[4]] = mountLine{sc.Text(), fields[sep+1], strings.Contains(opts, ",ro,"), strings.Contains(opts, ",nosuid,")}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ms
}

func statusField(status, key string) int {
	for line := range strings.Lines(status) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// sameFile fails t unless a and b are the same file.
func sameFile(t *testing.T, a, b string) {
	t.Helper()
	sa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(sa, sb) {
		t.Errorf("%s is not %s", a, b)
	}
}

// TestShares: each share is bound at its host path in QEMU's root,
// read-only when the share is, and the guest still boots.
func TestShares(t *testing.T) {
	needQEMU(t)
	cfg, kernel := guestConfig(t)
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "hello"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Shares = []Share{{Tag: "ro", Dir: ro, ReadOnly: true}, {Tag: "rw", Dir: rw}}
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, vm)
	checkRoot(t, vm, kernel, cfg.Shares)
	got, err := os.ReadFile("/proc/" + strconv.Itoa(vm.Pid()) + "/root" + ro + "/hello")
	if err != nil || string(got) != "from the host" {
		t.Errorf("the read-only share's file in QEMU's root = %q, %v", got, err)
	}
}

// TestShareRefused: a share that is no directory, or a symlink to one,
// fails Start with one line naming it, before QEMU runs.
func TestShareRefused(t *testing.T) {
	needQEMU(t)
	cfg := testConfig(t)
	dir := t.TempDir()
	file, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "not a directory"},
		{link, "symlink"},
		{filepath.Join(link, "real"), "symlink in its path"},
	} {
		cfg.Shares = []Share{{Tag: "s", Dir: tc.dir}}
		vm, err := Start(context.Background(), cfg)
		if err == nil {
			closeVM(t, vm)
			t.Errorf("Start with share %s started", tc.dir)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Start with share %s = %v, want one line saying %q", tc.dir, err, tc.want)
		}
	}
}

// TestOpenShareRefused: a share reached through a symlink in any
// component, or on a filesystem that is the kernel's interface, is
// refused in one line naming it; a plain directory is opened.
func TestOpenShareRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(dir, "real"), ""},
		{filepath.Join(dir, "link", "real"), "symlink in its path"},
		{filepath.Join(dir, "link"), "symlink in its path"},
		{"/proc/self", "symlink in its path"},
		{"/proc/1", "on proc,"},
		{"/sys/kernel", "on sysfs,"},
	} {
		f, err := openShare(tc.dir)
		if err == nil {
			closeLogged(f, tc.dir)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("openShare(%s) = %v, want opened", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("openShare(%s) = %v, want one line saying %q", tc.dir, err, tc.want)
		}
	}
}

// TestCheckConfinement: this host, as root, can build QEMU's root, which
// doctor reports.
func TestCheckConfinement(t *testing.T) {
	testhost.RequireRoot(t)
	if err := CheckConfinement(); err != nil {
		t.Errorf("CheckConfinement = %v, want nil as root on Linux 5.12 or newer", err)
	}
}

// TestRootPlan: QEMU's thread leaves the host's namespaces first and ends
// in the new root, made read-only; its tmpfs has an inode for everything
// the plan and the initrd's file create, however deep a share lies; every
// op is one plan.Apply carries out; and none makes or changes a path
// through a bind attached before it.
func TestRootPlan(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deep := "/srv/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p"
	l := &launch{cfg: Config{Initrd: make([]byte, 100)}}
	shares := []Share{{Tag: "d", Dir: deep}, {Tag: "s", Dir: "/srv/a/b/other"}, {Tag: "t", Dir: "/tmp/work"}}
	for _, b := range rootBinds(TCG, []string{"/usr/lib/x86_64-linux-gnu", "/lib64"}, true, shares) {
		l.mounts = append(l.mounts, mountAt{f, b})
	}
	build, seal := l.rootPlan()
	ops := append(build, seal...)
	if seal[0].Code != plan.MountSetattr || seal[0].Ints[0] != unix.MOUNT_ATTR_RDONLY {
		t.Errorf("sealing QEMU's root starts with %v, want making it read-only", seal[0])
	}
	if ops[0].Code != plan.Unshare || ops[0].Ints[0] != qemuNamespaces {
		t.Errorf("the plan starts with %v, want leaving the host's namespaces", ops[0])
	}
	if last := ops[len(ops)-1]; last.Code != plan.Chdir || last.Strs[0] != "/" {
		t.Errorf("the plan ends with %v, want entering the new root", last)
	}
	created, inodes := 1, -1 // the initrd's file
	for _, op := range ops {
		switch op.Code {
		case plan.Mkdir, plan.Touch, plan.Symlink, plan.WriteFile:
			created++
		case plan.Mount:
			if op.Strs[2] == "tmpfs" {
				_, n, _ := strings.Cut(op.Strs[3], "nr_inodes=")
				inodes, _ = strconv.Atoi(n)
			}
		case plan.Seccomp, plan.Exec, plan.Env, plan.Drain, plan.Sysinfo:
			t.Errorf("the plan holds %v, which plan.Apply leaves to its caller", op.Code)
		}
	}
	if inodes <= created {
		t.Errorf("QEMU's root has %d inodes for the %d files its plan creates", inodes, created)
	}
	checkNothingThroughBinds(t, ops)
}

// checkNothingThroughBinds: no op of the plan makes or changes a path
// under a bind attached before it, which would reach the host's files
// (through the bind, as root).
func checkNothingThroughBinds(t *testing.T, ops []plan.Op) {
	t.Helper()
	var bound []string
	for _, op := range ops {
		switch op.Code {
		case plan.MoveMount:
			bound = append(bound, op.Strs[0])
		case plan.Mkdir, plan.Chmod, plan.Touch, plan.Symlink, plan.Mount:
			target := op.Strs[0]
			if op.Code == plan.Symlink || op.Code == plan.Mount {
				target = op.Strs[1]
			}
			for _, b := range bound {
				if strings.HasPrefix(target, b+"/") {
					t.Errorf("the plan's %v reaches %s through the bind at %s", op.Code, target, b)
				}
			}
		}
	}
}

// BenchmarkConfine measures what confining QEMU costs a start, against
// what the same start did before (same run, same host load):
//
//   - before: QEMU's PID, network, IPC and UTS namespaces made (then by
//     clone, here by unshare on a thrown-away thread) and the initrd
//     written into a sealed memfd;
//   - after: copying its root's mounts, then on a thread of its own (thrown
//     away after, as QEMU's is) leaving the host's namespaces, building
//     the root with the initrd written into it, pivoting, and installing
//     the filter.
//
// Compare either with BenchmarkBoot's boot to hello.
func BenchmarkConfine(b *testing.B) {
	needQEMU(b)
	cfg, err := testConfig(b).normalize()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("before", func(b *testing.B) {
		for b.Loop() {
			onThrownAwayThread(b, func() error {
				if err := unix.Unshare(unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS); err != nil {
					return err
				}
				return sealedMemfd(cfg.Initrd)
			})
		}
	})
	b.Run("after", func(b *testing.B) {
		for b.Loop() {
			l := &launch{cfg: cfg, accel: AccelChoice{Accel: TCG}}
			if err := l.openQEMU(); err != nil {
				b.Fatal(err)
			}
			if l.kernel, err = openKernel(cfg); err != nil {
				b.Fatal(err)
			}
			if err := l.rootMounts(); err != nil {
				b.Fatal(err)
			}
			onThrownAwayThread(b, l.confine)
			l.closeFiles()
		}
	})
}

// onThrownAwayThread runs fn on a thread locked to a goroutine and never
// unlocked, which the runtime ends with the goroutine.
func onThrownAwayThread(b *testing.B, fn func() error) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		done <- fn()
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// sealedMemfd writes b into a sealed memfd, as the launcher passed the
// initrd before QEMU had a root of its own, and closes it.
func sealedMemfd(b []byte) error {
	fd, err := unix.MemfdCreate("warden-initrd", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "warden-initrd")
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return err
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	return err
}

// TestSharePropagation: a share's copy in QEMU's root is private. A mount
// the host makes under a share after Start (in a shared mount the test
// makes of its own directory) does not appear in QEMU's root, and the host
// gains no mount from QEMU's.
func TestSharePropagation(t *testing.T) {
	needQEMU(t)
	cfg := testConfig(t)
	top := sharedTestMount(t)
	share := filepath.Join(top, "share")
	if err := os.MkdirAll(filepath.Join(share, "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Shares = []Share{{Tag: "s", Dir: share}}
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, vm)
	later := filepath.Join(share, "later")
	if err := unix.Mount("warden-test", later, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountTest(t, later) })
	if _, ok := readMountinfo(t, "/proc/"+strconv.Itoa(vm.Pid())+"/mountinfo")[later]; ok {
		t.Errorf("the host's mount at %s, made after Start, is in QEMU's root", later)
	}
	for mp := range readMountinfo(t, "/proc/self/mountinfo") {
		if strings.HasPrefix(mp, top+"/") && mp != later {
			t.Errorf("the host gained the mount %s from QEMU's root", mp)
		}
	}
}

// sharedTestMount makes a temporary directory a mount of its own in a
// peer group of its own (shared, as / is on systemd hosts), unmounted when
// the test ends.
func sharedTestMount(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountTest(t, dir) })
	for _, flag := range []uintptr{unix.MS_PRIVATE, unix.MS_SHARED} {
		if err := unix.Mount("", dir, "", flag, ""); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func unmountTest(t *testing.T, dir string) {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Errorf("unmounting %s: %v", dir, err)
	}
}

// TestShareKeepsNestedMounts: a mount the caller put inside a share (a
// template root with a host directory bound in) is in QEMU's root too,
// restricted as the share is: read-only, nosuid.
func TestShareKeepsNestedMounts(t *testing.T) {
	needQEMU(t)
	cfg := testConfig(t)
	share, src := t.TempDir(), t.TempDir()
	inner := filepath.Join(share, "usr")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "hello"), []byte("nested"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, inner, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountTest(t, inner) })
	cfg.Shares = []Share{{Tag: "root", Dir: share, ReadOnly: true}}
	vm, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeVM(t, vm)
	dir := "/proc/" + strconv.Itoa(vm.Pid())
	m, ok := readMountinfo(t, dir+"/mountinfo")[inner]
	if !ok || !m.ro || !m.nosuid {
		t.Errorf("QEMU's mount at %s: %q (present %v), want the nested bind, read-only and nosuid", inner, m.line, ok)
	}
	if got, err := os.ReadFile(dir + "/root" + inner + "/hello"); err != nil || string(got) != "nested" {
		t.Errorf("the nested file in QEMU's root = %q, %v, want %q", got, err, "nested")
	}
	f, err := os.OpenFile(dir+"/root"+inner+"/hello", os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, unix.EROFS) {
		t.Errorf("opening the nested file for writing in QEMU's root: %v, want EROFS", err)
	}
}

// TestCheckLibDirs: a library directory QEMU's root needs that the host
// lacks is named in one line; this host has them all.
func TestCheckLibDirs(t *testing.T) {
	if err := checkLibDirs(); err != nil {
		t.Errorf("checkLibDirs on this host = %v, want nil (a Debian amd64 layout)", err)
	}
	saved := hostLibDirs
	t.Cleanup(func() { hostLibDirs = saved })
	missing := filepath.Join(t.TempDir(), "lib64")
	hostLibDirs = append(slices.Clone(saved), missing)
	err := checkLibDirs()
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "Debian") || strings.Contains(err.Error(), "\n") {
		t.Errorf("checkLibDirs without %s = %v, want one line naming it", missing, err)
	}
}
