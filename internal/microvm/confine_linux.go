package microvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// QEMU's thread leaves the host's namespaces, all at once, before it forks
// QEMU: the mount namespace its root is built in, and the PID (QEMU is its
// PID 1), network, IPC and UTS namespaces QEMU runs in.
const qemuNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// stageDir is where the thread mounts QEMU's root before it pivots into
// it: a directory every host has, covered only in the thread's own private
// mount namespace (what QEMU's root binds was opened before, by descriptor).
const stageDir = "/tmp"

// qemuProc is where QEMU's root has a procfs of its own: QEMU 7.2's 9p
// backend (security_model=none) chmods and sets xattrs through
// /proc/self/fd/N after every create. qemuProcOpts show only the
// processes QEMU may ptrace (its uid is this VM's alone, so itself) and
// only their directories: no /proc/sys, no other process, no kernel-wide
// file (Linux 5.8). It is read-only, nosuid, nodev and noexec.
const (
	qemuProc     = "/proc"
	qemuProcOpts = "hidepid=invisible,subset=pid"
)

// rootInodes is the slack of QEMU's root tmpfs's inode count over the
// files its plan creates (the root directory itself among them).
const rootInodes = 4

// rootMounts opens every mount QEMU's root binds as a detached copy
// (open_tree), in the host's mount namespace and by descriptor where the
// launcher opened the file (the binary, the guest kernel, an initrd file,
// each share), with its attributes already set: read-only, nosuid, nodev,
// noexec, except what a bind needs. QEMU's thread attaches them after it
// leaves the host's mount namespace, which they outlive.
func (l *launch) rootMounts() error {
	if err := checkLibDirs(); err != nil {
		return err
	}
	binds := rootBinds(l.accel.Accel, libDirs(), l.initrd != nil, l.cfg.Shares)
	held := map[string]*os.File{qemuBinary: l.qemu, guestKernel: l.kernel, guestInitrd: l.initrd}
	var hostMounts []hostMount
	if len(l.cfg.Shares) > 0 {
		var err error
		if hostMounts, err = readMounts(); err != nil {
			return err
		}
	}
	for _, b := range binds {
		fd, err := l.rootMount(b, held, hostMounts)
		if err != nil {
			return err
		}
		l.mounts = append(l.mounts, mountAt{os.NewFile(uintptr(fd), "mount of "+b.Dst), b})
	}
	return nil
}

// mountAt is a detached mount and where QEMU's root attaches it.
type mountAt struct {
	f *os.File
	b bind
}

// rootMount clones b's source: a file the launcher holds, a share (opened
// here without following a symlink, and holding no kernel filesystem's
// mount in hostMounts), or a host path of QEMU's own.
func (l *launch) rootMount(b bind, held map[string]*os.File, hostMounts []hostMount) (int, error) {
	if f := held[b.Dst]; f != nil && b.Src == "" {
		return cloneMount(int(f.Fd()), "", b)
	}
	if b.Src != "" {
		return cloneMount(unix.AT_FDCWD, b.Src, b)
	}
	dir, err := openShare(b.Dst)
	if err != nil {
		return -1, err
	}
	defer closeLogged(dir, "share "+b.Dst)
	if err := checkShareMounts(b.Dst, hostMounts); err != nil {
		return -1, err
	}
	return cloneMount(int(dir.Fd()), "", b)
}

// openShare opens a share's directory for open_tree, so that what is
// bound is what was checked: by a path none of whose components may be a
// symlink (openat2's RESOLVE_NO_SYMLINKS: one swapped in anywhere on the
// way is refused, not followed), and on no kernel interface's filesystem.
func openShare(dir string) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("microvm: share directory %s does not exist; create it or share another", dir)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("microvm: share %s is not a directory or has a symlink in its path; share the directory by its real path", dir)
	case err != nil:
		return nil, fmt.Errorf("microvm: opening share %s (openat2, Linux 5.6): %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	if err := checkShareFS(f); err != nil {
		closeLogged(f, "share "+dir)
		return nil, err
	}
	return f, nil
}

// kernelFS are the filesystems a share may not be on nor hold a mount
// of, by their name in mountinfo, with their statfs magic (0 where it is
// not their own): each is an interface to the host kernel (its processes,
// devices, cgroups, tracing, firmware variables, security policy, RPC and
// NFS server state, message queues, automounts), not files to hand a
// guest. devtmpfs reports tmpfs's magic, so only mountinfo tells it apart.
var kernelFS = map[string]int64{
	"proc": unix.PROC_SUPER_MAGIC, "sysfs": unix.SYSFS_MAGIC, "cgroup": unix.CGROUP_SUPER_MAGIC,
	"cgroup2": unix.CGROUP2_SUPER_MAGIC, "debugfs": unix.DEBUGFS_MAGIC, "tracefs": unix.TRACEFS_MAGIC,
	"securityfs": unix.SECURITYFS_MAGIC, "bpf": unix.BPF_FS_MAGIC, "devpts": unix.DEVPTS_SUPER_MAGIC,
	"efivarfs": unix.EFIVARFS_MAGIC, "pstore": unix.PSTOREFS_MAGIC, "binfmt_misc": unix.BINFMTFS_MAGIC,
	"selinuxfs": unix.SELINUX_MAGIC, "smackfs": unix.SMACK_MAGIC, "configfs": configfsMagic,
	"fusectl": fusectlMagic, "hugetlbfs": unix.HUGETLBFS_MAGIC, "resctrl": unix.RDTGROUP_SUPER_MAGIC,
	"rpc_pipefs": rpcPipefsMagic, "nfsd": nfsdMagic, "mqueue": mqueueMagic,
	"autofs": unix.AUTOFS_SUPER_MAGIC, "devtmpfs": 0,
}

// The magics x/sys/unix lacks: configfs and fusectl (linux/magic.h),
// rpc_pipefs (net/sunrpc/rpc_pipe.c), nfsd (fs/nfsd/nfsctl.c) and mqueue
// (ipc/mqueue.c).
const (
	configfsMagic  = 0x62656570
	fusectlMagic   = 0x65735543
	rpcPipefsMagic = 0x67596969
	nfsdMagic      = 0x6e667364
	mqueueMagic    = 0x19800202
)

// checkShareFS refuses a share on one of kernelFS.
func checkShareFS(f *os.File) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("microvm: share %s: statfs: %w", f.Name(), err)
	}
	for name, magic := range kernelFS {
		if magic != 0 && magic == st.Type {
			return fmt.Errorf("microvm: share %s is on %s, the host kernel's interface; share a directory of files", f.Name(), name)
		}
	}
	return nil
}

// cloneMount makes a detached copy of the mount at dfd/path (dfd itself
// when path is ""), restricted as b allows; a share's copy holds copies of
// the mounts under it too, each restricted alike (AT_RECURSIVE).
func cloneMount(dfd int, path string, b bind) (int, error) {
	flags, setFlags := uint(unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC), unix.AT_EMPTY_PATH
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if b.Tree {
		flags |= unix.AT_RECURSIVE
		setFlags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(dfd, path, flags)
	if err != nil {
		return -1, fmt.Errorf("microvm: copying the mount of %s for QEMU's root (open_tree, Linux 5.2): %w", b.Dst, err)
	}
	// Private: a copy stays in its source's peer group until told
	// otherwise (unsharing a mount namespace does not reach detached
	// mounts), so a host mount under it would appear in QEMU's root and
	// QEMU's root's mounts would propagate to the host.
	attr := unix.MountAttr{Attr_set: mountAttrs(b), Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(fd, "", uint(setFlags), &attr); err != nil {
		if cerr := unix.Close(fd); cerr != nil {
			warn("closing a mount copy", cerr)
		}
		return -1, fmt.Errorf("microvm: restricting the mount of %s for QEMU's root (mount_setattr, Linux 5.12): %w", b.Dst, err)
	}
	return fd, nil
}

// mountAttrs are b's mount attributes: everything off that b does not need.
func mountAttrs(b bind) uint64 {
	a := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC)
	if b.Writable {
		a &^= unix.MOUNT_ATTR_RDONLY
	}
	if b.Exec {
		a &^= unix.MOUNT_ATTR_NOEXEC
	}
	if b.Dev {
		a &^= unix.MOUNT_ATTR_NODEV
	}
	return a
}

// libDirs are hostLibDirs that are real directories on this host (not
// reached through a symlink, which rootLinks mirrors instead).
func libDirs() []string {
	var ds []string
	for _, d := range hostLibDirs {
		if real, err := filepath.EvalSymlinks(d); err == nil && real == d {
			ds = append(ds, d)
		}
	}
	return ds
}

// checkLibDirs says in one line which of hostLibDirs this host lacks:
// QEMU's root is laid out for a Debian amd64 host (the loader in /lib64,
// the libraries and QEMU's modules in /lib/x86_64-linux-gnu, or their
// merged-/usr places), and QEMU would not load without them.
func checkLibDirs() error {
	for _, d := range hostLibDirs {
		if _, err := os.Stat(d); err != nil {
			return fmt.Errorf("microvm: QEMU's library directory %s is missing (QEMU's root assumes a Debian amd64 host's layout): %w", d, err)
		}
	}
	return nil
}

// rootPlan is what QEMU's thread does, as plan ops (internal/plan's Go
// applier runs them), in two parts with the initrd written between them
// (writeInitrd): build leaves the host's namespaces, keeps its mounts from
// propagating, mounts a small tmpfs and QEMU's /proc in it, makes the
// mount points and attaches the detached mounts; seal makes the tmpfs
// read-only, pivots into it and drops the host's root.
func (l *launch) rootPlan() (build, seal []plan.Op) {
	p := &rootPlanner{}
	p.add(plan.Unshare, []uint64{qemuNamespaces}, nil, "leaving the host's namespaces")
	p.add(plan.Mount, []uint64{unix.MS_REC | unix.MS_PRIVATE, 0}, []string{"", "/", "", ""}, "making the host's mounts private")
	p.add(plan.Mount, []uint64{unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, 0}, []string{"warden-qemu", stageDir, "tmpfs", ""}, "mounting QEMU's root")
	root := len(p.ops) - 1 // its size is known once the plan is
	p.dirs(qemuProc)
	p.add(plan.Mount, []uint64{unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, 0}, []string{"proc", stageDir + qemuProc, "proc", qemuProcOpts}, "mounting QEMU's own /proc")
	for _, link := range rootLinks {
		if target, err := os.Readlink(link); err == nil {
			p.add(plan.Symlink, nil, []string{target, stageDir + link}, "linking "+link)
		}
	}
	for _, m := range l.mounts {
		p.mountPoint(m.b)
		p.add(plan.MoveMount, []uint64{uint64(m.f.Fd())}, []string{stageDir + m.b.Dst}, "binding "+m.b.Dst)
	}
	if l.initrd == nil {
		p.dirs(filepath.Dir(guestInitrd))
		p.created++ // writeInitrd's file
	}
	// The tmpfs holds what the plan creates, and no more.
	size := len(l.cfg.Initrd) + 1<<20
	p.ops[root].Strs[3] = "mode=0755,size=" + strconv.Itoa(size) + ",nr_inodes=" + strconv.Itoa(p.created+rootInodes)
	build, p.ops = p.ops, nil
	p.add(plan.MountSetattr, []uint64{unix.MOUNT_ATTR_RDONLY, 0, 0}, []string{stageDir}, "making QEMU's root read-only")
	p.add(plan.Chdir, nil, []string{stageDir}, "entering QEMU's root")
	p.add(plan.PivotRoot, nil, nil, "pivoting into QEMU's root")
	p.add(plan.Umount, []uint64{unix.MNT_DETACH}, []string{"."}, "detaching the host's root")
	p.add(plan.Chdir, nil, []string{"/"}, "entering QEMU's root")
	return build, p.ops
}

// writeInitrd writes an initrd given as bytes into the staged root,
// read-only to all, straight from Config.Initrd: a plan op's string would
// copy its megabytes twice more.
func (l *launch) writeInitrd() error {
	if l.initrd != nil {
		return nil
	}
	f, err := os.OpenFile(stageDir+guestInitrd, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o444)
	if err == nil {
		_, err = f.Write(l.cfg.Initrd)
		if err == nil {
			err = f.Chmod(0o444) // whatever the umask
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("microvm: confining QEMU: writing the initrd into its root: %w", err)
	}
	return nil
}

// rootPlanner collects rootPlan's ops and the directories made so far.
type rootPlanner struct {
	ops     []plan.Op
	made    map[string]bool
	created int // files, directories and symlinks the ops create
}

func (p *rootPlanner) add(code plan.Code, ints []uint64, strs []string, ctx string) {
	switch code {
	case plan.Mkdir, plan.Touch, plan.Symlink, plan.WriteFile:
		p.created++
	}
	p.ops = append(p.ops, plan.Op{Code: code, Ints: ints, Strs: strs, Context: "confining QEMU: " + ctx})
}

// dirs makes dir and its parents in the staged root, world-searchable
// whatever the umask.
func (p *rootPlanner) dirs(dir string) {
	if dir == "/" || p.made[dir] {
		return
	}
	p.dirs(filepath.Dir(dir))
	if p.made == nil {
		p.made = map[string]bool{}
	}
	p.made[dir] = true
	p.add(plan.Mkdir, []uint64{0o755, uint64(unix.EEXIST)}, []string{stageDir + dir}, "making "+dir)
	p.add(plan.Chmod, []uint64{0o755}, []string{stageDir + dir}, "making "+dir+" searchable")
}

// mountPoint makes b's mount point: a directory, or an empty file.
func (p *rootPlanner) mountPoint(b bind) {
	if !b.File {
		p.dirs(b.Dst)
		return
	}
	p.dirs(filepath.Dir(b.Dst))
	p.add(plan.Touch, []uint64{0o444}, []string{stageDir + b.Dst}, "making the mount point "+b.Dst)
}

// CheckConfinement says, in one line, why this host cannot confine QEMU
// as Start does, or nil: Start needs amd64 (QEMU's filter is written for
// its syscall table), root and a kernel with open_tree and mount_setattr
// (Linux 5.12) to build QEMU's root, and refuses to start QEMU without
// them. It copies a mount of / and restricts the copy, which is detached
// and never attached, so the host sees nothing.
func CheckConfinement() error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("microvm: QEMU's seccomp filter is written for amd64, not %s", runtime.GOARCH)
	}
	fd, err := cloneMount(unix.AT_FDCWD, "/", bind{Dst: "/"})
	if err != nil {
		return fmt.Errorf("%w: QEMU's own root needs root and Linux 5.12 or newer", err)
	}
	if err := unix.Close(fd); err != nil {
		warn("closing a mount copy", err)
	}
	return nil
}
