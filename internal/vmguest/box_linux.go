package vmguest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/rootfs"
)

// Where the guest init assembles the box, in the initramfs's own root
// (a ramfs only the init sees): the box's root and the scratch.
const (
	boxDir     = "/box"
	scratchDir = "/scratch"
)

// devSize bounds the box's /dev tmpfs: a few nodes and links.
const devSize = "size=64k,nr_inodes=64,mode=755"

// agentEnv is the environment the agent runs with, which the processes it
// starts inherit where a request names none; the agent keeps to one
// thread of Go code (GOMAXPROCS=1, set in the runtime too, as the
// variable is read only at a Go program's start).
var agentEnv = []string{"GOMAXPROCS=1", "PATH=/usr/bin:/bin"}

// becomeBox builds the box b describes and becomes the boxed agent in it,
// still PID 1, the port its control connection (its stdin,
// nsinit.BoxedStdin), in the box's memory cgroup, whose memory.events it
// keeps at nsinit.MemoryEventsFD. It does not exec the agent: this
// process is warden-init already, and an exec would only start a second
// Go runtime under emulation (docs/performance.md has its cost). It
// returns only on failure.
func becomeBox(port *os.File, b Boot) error {
	if err := unix.Sethostname([]byte(b.Hostname)); err != nil {
		return fmt.Errorf("setting the host name: %w", err)
	}
	// The VM has no network device: lo is the box's only interface, up
	// as on every backend, where the agent's egress bridge listens with
	// --net proxy.
	if err := plan.ApplyOne(plan.Op{Code: plan.LinkUp, Strs: []string{"lo"}}); err != nil {
		return fmt.Errorf("bringing up lo: %w", err)
	}
	// The guest is the box's IPC namespace. A SysV object's memory stays
	// charged to the box's cgroup, and without swap nothing reclaims it:
	// objects a finished process left filling --memory would leave every
	// later process of the session to the OOM killer, or hung at the limit
	// until its timeout.
	if err := nsinit.LimitSessionIPC(); err != nil {
		return err
	}
	if err := mountCgroup(); err != nil {
		return err
	}
	events, err := limitBox(cgroupDir, b.MemoryBytes)
	if err != nil {
		return err
	}
	defer events.Close()
	if err := assemble(b); err != nil {
		return err
	}
	if err := switchRoot(boxDir); err != nil {
		return err
	}
	// The port becomes the agent's stdin; the agent moves it to its
	// control descriptor and points stdin at /dev/null. port itself is
	// closed, so no finalizer of it closes that number later.
	if err := unix.Dup3(int(port.Fd()), 0, 0); err != nil {
		return fmt.Errorf("passing the agent port on: %w", err)
	}
	if err := port.Close(); err != nil {
		return fmt.Errorf("passing the agent port on: %w", err)
	}
	// After the port's own descriptor is closed: the move to
	// MemoryEventsFD may take that number. events stays open (its deferred
	// Close holds it) for as long as the agent serves.
	if err := passMemoryEvents(events); err != nil {
		return err
	}
	if err := setAgentEnv(); err != nil {
		return err
	}
	runtime.GOMAXPROCS(1)
	nsinit.ServeBoxedStdin()
	return errors.New("the agent returned")
}

// setAgentEnv replaces the environment the kernel gave this init
// (HOME, TERM and any unknown kernel parameter) with agentEnv.
func setAgentEnv() error {
	os.Clearenv()
	for _, kv := range agentEnv {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("setting the agent's environment: %w", err)
		}
	}
	return nil
}

// assemble mounts the box's tree at boxDir as the gVisor bundle lays it
// out: the root read-only (its binds already in it, from the host), the
// scratch's directories writable, /proc, a minimal /dev, and warden-init
// itself (this initramfs's /init) at nsinit.BoxedPath. Every mount is
// nosuid and nodev but /dev's, whose nodes the init makes itself.
func assemble(b Boot) error {
	if err := mount9p(b.Root, boxDir, b.Cache, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if err := mount9p(b.Scratch, scratchDir, "none", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if err := mountScratchDirs(b); err != nil {
		return err
	}
	// hidepid=invisible: the agent (PID 1, root) and its threads are
	// neither listed nor readable (/proc/1/status showed its name and
	// ids) to the user's uid; the agent, root, still sees every task.
	if err := mountIn("proc", "proc", "/proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return err
	}
	if err := makeDev(b); err != nil {
		return err
	}
	return bindInit()
}

// mount9p mounts the 9p share tag at dst over virtio. The guest's user
// ids pass through (access=user: each user its own attach, checked by the
// guest kernel against the owners the host reports).
func mount9p(tag, dst, cache string, flags uintptr) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("creating %q: %w", dst, err)
	}
	opts := "trans=virtio,version=9p2000.L,access=user,msize=262144,cache=" + cache
	if err := unix.Mount(tag, dst, "9p", flags, opts); err != nil {
		return fmt.Errorf("mounting the 9p share %q on %q: %w", tag, dst, err)
	}
	return nil
}

// mountScratchDirs binds the scratch's directories to their places, and
// its tmp at /var/tmp too where the root asks for it.
func mountScratchDirs(b Boot) error {
	const rw = unix.MS_NOSUID | unix.MS_NODEV
	names := make([]string, 0, len(b.ScratchDirs))
	for name := range b.ScratchDirs {
		names = append(names, name)
	}
	// parents first: /dev/shm goes after /dev is made, the rest in any order
	slices.Sort(names)
	for _, name := range names {
		if b.ScratchDirs[name] == "/dev/shm" {
			continue
		}
		if err := bindIn(filepath.Join(scratchDir, name), b.ScratchDirs[name], rw); err != nil {
			return err
		}
	}
	if tmp, ok := scratchFor(b, "/tmp"); ok && b.VarTmp {
		if err := bindIn(filepath.Join(scratchDir, tmp), "/var/tmp", rw); err != nil {
			return err
		}
	}
	return nil
}

// scratchFor is the name of the scratch directory the boot message
// places at place (the host's rootfs.ScratchDirs, the one list of them).
func scratchFor(b Boot, place string) (string, bool) {
	for name, p := range b.ScratchDirs {
		if p == place {
			return name, true
		}
	}
	return "", false
}

// bindIn binds src at dst inside the box with flags (a bind takes its
// flags only on a remount).
func bindIn(src, dst string, flags uintptr) error {
	target, err := boxPath(dst)
	if err != nil {
		return err
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %q at %q: %w", src, dst, err)
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
		return fmt.Errorf("remounting %q: %w", dst, err)
	}
	return nil
}

// mountIn mounts a file system at dst inside the box.
func mountIn(src, fstype, dst string, flags uintptr, data string) error {
	target, err := boxPath(dst)
	if err != nil {
		return err
	}
	if err := unix.Mount(src, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s on %q: %w", fstype, dst, err)
	}
	return nil
}

// boxPath is dst inside the box, refused unless it is a directory there
// reached without a symlink: the root is read-only and the mount points
// are the template's, so nothing is made, and a link in the (possibly
// image-made) root must not lead a mount out of the box.
func boxPath(dst string) (string, error) {
	target := filepath.Join(boxDir, dst)
	for p := target; p != boxDir; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("mount point %q: %w", dst, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("mount point %q passes through a symlink at %q", dst, p)
		}
	}
	return target, nil
}

// makeDev mounts /dev as a small tmpfs holding the nodes every backend's
// box has (rootfs.Devices, made by their numbers), the links into /proc,
// and /dev/shm from the scratch where the boot message places one there.
func makeDev(b Boot) error {
	if err := mountIn("tmpfs", "tmpfs", "/dev", unix.MS_NOSUID|unix.MS_NOEXEC, devSize); err != nil {
		return err
	}
	dev := filepath.Join(boxDir, "dev")
	for _, d := range rootfs.Devices {
		p := filepath.Join(dev, d.Name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.Major, d.Minor))); err != nil {
			return fmt.Errorf("mknod /dev/%s: %w", d.Name, err)
		}
		if err := unix.Chmod(p, 0o666); err != nil {
			return fmt.Errorf("chmod /dev/%s: %w", d.Name, err)
		}
	}
	for name, to := range rootfs.DevLinks {
		if err := os.Symlink(to, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("linking /dev/%s: %w", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o755); err != nil {
		return fmt.Errorf("creating /dev/shm: %w", err)
	}
	shm, ok := scratchFor(b, "/dev/shm")
	if !ok {
		return nil
	}
	return bindIn(filepath.Join(scratchDir, shm), "/dev/shm", unix.MS_NOSUID|unix.MS_NODEV)
}

// bindInit shows this initramfs's /init (warden-init) at
// nsinit.BoxedPath on a tmpfs of its own, read-only.
func bindInit() error {
	dir := filepath.Dir(nsinit.BoxedPath)
	if err := mountIn("tmpfs", "tmpfs", dir, unix.MS_NOSUID|unix.MS_NODEV, "size=4k,nr_inodes=4,mode=755"); err != nil {
		return err
	}
	target := filepath.Join(boxDir, nsinit.BoxedPath)
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o555)
	if err != nil {
		return fmt.Errorf("creating %s: %w", nsinit.BoxedPath, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("creating %s: %w", nsinit.BoxedPath, err)
	}
	if err := bindIn("/init", nsinit.BoxedPath, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	return unix.Mount("", filepath.Join(boxDir, dir), "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// switchRoot makes dir the root, as an initramfs's init does: the
// initramfs cannot be pivoted away from (pivot_root refuses the rootfs),
// so dir's mount moves over / and the process chroots into it. What stays
// below (this init's files, the shares' own mounts) is out of every
// path's reach; leaving it needs CAP_SYS_CHROOT, which the agent drops
// for itself and never gives the user.
func switchRoot(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("entering the box's root: %w", err)
	}
	if err := unix.Mount(dir, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving the box's root over /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("entering the box's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("entering the box's root: %w", err)
	}
	return nil
}
