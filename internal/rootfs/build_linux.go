package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// scratchDir is where the shared writable tmpfs sits while its
// subdirectories are bound into place; it is unmounted before pivot_root.
const scratchDir = ".scratch"

// Build assembles the sandbox root under newRoot, which must be an empty
// directory in a private mount namespace, then pivots into it and detaches
// the host's tree. The caller must hold CAP_SYS_ADMIN in the namespace's
// owning user namespace and run as PID 1 of a new PID namespace.
func Build(newRoot string, o Options) error {
	if o.Image != nil {
		return build(newRoot, o, imageSteps)
	}
	if o.Etc.Dir == "" {
		return errors.New("building /etc: no /etc template was given")
	}
	// The template may sit where the root tmpfs is about to be mounted
	// (a rootless user's is in /tmp): hold it by a descriptor.
	etc, err := unix.Open(o.Etc.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the /etc template %q: %w", o.Etc.Dir, err)
	}
	defer unix.Close(etc)
	o.etcFD = etc
	return build(newRoot, o, hostSteps)
}

// buildStep is one step of Build, named for its error.
type buildStep struct {
	what string
	fn   func(string, Options) error
}

// hostSteps build a root on the host's /usr and curated /etc.
var hostSteps = []buildStep{
	{"making mounts private", makePrivate},
	{"mounting root tmpfs", mountRoot},
	{"binding /usr", bindUsr},
	{"building /etc", buildEtc},
	{"building writable dirs", buildScratch},
	{"building /dev", buildDev},
	{"mounting /proc", buildProc},
	{"showing the sandbox its own /proc and /sys", buildView},
	{"pivoting root", pivot},
}

// imageSteps build a root on a template's tree (Options.Image): the same
// as hostSteps, but the template's entries and /etc come after the
// scratch, whose tmpfs holds the template's mount while it is used, and
// the template's home and /workspace are copied into the scratch.
var imageSteps = []buildStep{
	{"making mounts private", makePrivate},
	{"mounting root tmpfs", mountRoot},
	{"building writable dirs", buildScratch},
	{"binding the template's root", bindImage},
	{"copying the template's home and /workspace", seedImage},
	{"building /dev", buildDev},
	{"mounting /proc", buildProc},
	{"showing the sandbox its own /proc and /sys", buildView},
	{"pivoting root", pivot},
}

func build(newRoot string, o Options, steps []buildStep) error {
	o.View.CPUs = ClampCPUs(o.View.CPUs, runtime.NumCPU())
	for _, s := range steps {
		if err := s.fn(newRoot, o); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

func makePrivate(string, Options) error { return mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }

func mountRoot(root string, o Options) error {
	if err := mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsData("0755", 4*1024*1024, 4096, o.UID, o.GID)); err != nil {
		return err
	}
	for _, d := range []string{"etc", "dev", "proc", "tmp", "workspace", "home", "home/sandbox", "run", scratchDir} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if o.Image != nil {
		return nil // the template's /usr, and its /var or makeVar's
	}
	if err := os.Mkdir(filepath.Join(root, "usr"), 0o755); err != nil {
		return err
	}
	return makeVar(root)
}

func bindUsr(root string, _ Options) error {
	if err := bindRO("/usr", filepath.Join(root, "usr"), true); err != nil {
		return err
	}
	for _, name := range UsrMergeLinks {
		if err := mirror("/"+name, filepath.Join(root, name)); err != nil {
			return err
		}
	}
	return nil
}

// mirror recreates host path src at dst as a template has it (see
// classify), binding a bound entry at once: a usr-merged host's links, or
// the directories of one that is not.
func mirror(src, dst string) error {
	e, _ := classify(src, searchable{})
	if err := writeEntry(dst, src, e); err != nil {
		return err
	}
	if e.kind == entryBound {
		return bindRO(src, dst, true)
	}
	return nil
}

// maxCopiedFile bounds the host files a template copies rather than binds:
// a copy costs a few pages once per host, a bind two mount operations
// under the namespace lock in every sandbox.
const maxCopiedFile = 256 << 10

// buildEtc binds the host's /etc template read-only, then binds the
// host entries it leaves to be bound over their mount points.
func buildEtc(root string, o Options) error {
	etc := filepath.Join(root, "etc")
	if err := bindRO("/proc/self/fd/"+strconv.Itoa(o.etcFD), etc, false); err != nil {
		return err
	}
	for _, name := range o.Etc.Binds {
		if err := bindRO(filepath.Join("/etc", name), filepath.Join(etc, name), true); err != nil {
			return err
		}
	}
	return nil
}

// buildScratch mounts one tmpfs with the disk and inode limits and binds its
// subdirectories to /workspace, /tmp, /home/sandbox and /dev/shm later, so
// the limit bounds them together rather than each.
func buildScratch(root string, o Options) error {
	scratch := filepath.Join(root, scratchDir)
	if o.HostScratch {
		return bindHostScratch(root, o)
	}
	if err := mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsData("0755", o.DiskBytes, o.Inodes, o.UID, o.GID)); err != nil {
		return err
	}
	dirs := map[string]os.FileMode{"tmp": 0o1777 | os.ModeSticky, "home": 0o755, "shm": 0o1777 | os.ModeSticky, "workspace": 0o755}
	for d, mode := range dirs {
		p := filepath.Join(scratch, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	binds := map[string]string{"tmp": "tmp", "home": "home/sandbox"}
	if o.WorkspaceFD < 0 {
		binds["workspace"] = "workspace"
	} else if err := attachWorkspace(o, filepath.Join(root, "workspace")); err != nil {
		return err
	}
	for src, dst := range binds {
		if err := mount(filepath.Join(scratch, src), filepath.Join(root, dst), "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return nil
}

// bindHostScratch puts the host's scratch tmpfs where the sandbox's own
// would be and binds its directories in place: the host made them (see
// MountScratch), and its size is the disk limit.
func bindHostScratch(root string, o Options) error {
	scratch := filepath.Join(root, scratchDir)
	if err := attachWorkspace(o, scratch); err != nil {
		return err
	}
	for _, d := range []string{"tmp", "home", "workspace", "shm"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(scratch, d), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("the host's scratch has no directory %q", d)
		}
	}
	for src, dst := range map[string]string{"tmp": "tmp", "home": "home/sandbox", "workspace": "workspace"} {
		if err := mount(filepath.Join(scratch, src), filepath.Join(root, dst), "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return nil
}

// attachWorkspace puts the host's workspace at dst, read-write, without
// set-uid or device files taking effect: a detached mount is moved into
// place as it is, a directory is bound.
func attachWorkspace(o Options, dst string) error {
	if o.WorkspaceIsMount {
		if err := unix.MoveMount(o.WorkspaceFD, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("moving workspace mount to %q: %w", dst, err)
		}
		return nil
	}
	src := "/proc/self/fd/" + strconv.Itoa(o.WorkspaceFD)
	if err := mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return restrict(dst, noDevice, false)
}

func buildDev(root string, o Options) error {
	dev := filepath.Join(root, "dev")
	from := o.Devices
	if from == "" {
		from = "/dev"
	}
	if err := mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, tmpfsData("0755", 64*1024, 64, -1, -1)); err != nil {
		return err
	}
	for _, d := range Devices {
		if err := bindDevice(filepath.Join(from, d.Name), filepath.Join(dev, d.Name), d); err != nil {
			return fmt.Errorf("/dev/%s: %w", d.Name, err)
		}
	}
	for name, target := range DevLinks {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o755); err != nil {
		return err
	}
	if err := mount(filepath.Join(root, scratchDir, "shm"), shm, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if err := unix.Unmount(filepath.Join(root, scratchDir), unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching scratch: %w", err)
	}
	if err := os.Remove(filepath.Join(root, scratchDir)); err != nil {
		return err
	}
	return restrict(dev, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
}

// bindDevice binds the node src at dst read-only, refusing anything but
// d's character device. Writes to a device on a read-only mount still
// work; changing its times does not (EROFS): the node's inode is shared
// with every other sandbox (and the host's, rootless), so its mtime would
// be a channel between them.
func bindDevice(src, dst string, d Device) error {
	if err := touch(dst); err != nil {
		return err
	}
	if err := mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(dst, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(d.Major, d.Minor) {
		return fmt.Errorf("%s is not the character device %d:%d (mode %o, device %d:%d)", src, d.Major, d.Minor,
			st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return restrict(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
}

// buildProc mounts the PID namespace's own /proc while the host's is still
// visible (the kernel refuses a new proc mount in a user namespace unless an
// unobstructed one exists), then masks what leaks host state.
func buildProc(root string, _ Options) error {
	proc := filepath.Join(root, "proc")
	if err := mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for _, name := range MaskedProcPaths {
		if err := mask(filepath.Join(proc, name), filepath.Join(root, "dev/null")); err != nil {
			return err
		}
	}
	for _, name := range ReadonlyProcPaths {
		p := filepath.Join(proc, name)
		if err := mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		if err := restrict(p, readOnly|unix.MOUNT_ATTR_NOEXEC, true); err != nil {
			return err
		}
	}
	return nil
}

func mask(p, devNull string) error {
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,nr_inodes=1,mode=0555")
	}
	return mount(devNull, p, "", unix.MS_BIND, "")
}

// pivot makes root the new "/" and detaches the host tree. pivot_root(".",
// ".") stacks the old root on top of the new one, so one lazy unmount of "."
// removes every host mount from the namespace.
func pivot(root string, _ Options) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	return restrict("/", readOnly, false)
}
