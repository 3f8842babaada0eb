package rootfs

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// scratchDir is where the shared writable tmpfs sits while its
// subdirectories are bound into place; it is unmounted before pivot_root.
const scratchDir = ".scratch"

// Build assembles the sandbox root under newRoot, which must be an empty
// directory in a private mount namespace, then pivots into it and detaches
// the host's tree. The caller must hold CAP_SYS_ADMIN in the namespace's
// owning user namespace and run as PID 1 of a new PID namespace. A root on
// the host's /usr is planned whole (Plan) and applied; a template's root
// runs its two steps that read the template's tree (bindImage and
// seedImage) between the planned ones.
func Build(newRoot string, o Options) error {
	steps, etc := imageSteps, -1
	if o.Image == nil {
		if err := checkHost(o); err != nil {
			return err
		}
		var err error
		if etc, err = holdEtc(o.Etc.Dir); err != nil {
			return err
		}
		defer closeLogged(etc, "the /etc template")
		steps = hostSteps
	}
	o.View.CPUs = ClampCPUs(o.View.CPUs, runtime.NumCPU())
	for _, s := range steps {
		if s.run != nil {
			if err := s.run(newRoot, o); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
			continue
		}
		pl := &planner{p: &plan.Plan{}, what: s.what, etcFD: etc, etcHeld: true, freshProc: filepath.Join(newRoot, "proc")}
		if err := s.plan(pl, newRoot, o); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		if err := apply(pl.p.Ops); err != nil {
			return err
		}
	}
	return nil
}

// Plan is the ops that build a root on the host's /usr and curated /etc
// under newRoot (see Build), made from o and the host's paths without
// changing anything: what warden-exec applies, and the Go init too (step
// by step, so that its view may read the sandbox's fresh procfs). Each
// op's context is the error text of the step that makes it.
func Plan(newRoot string, o Options) (*plan.Plan, error) {
	if err := checkHost(o); err != nil {
		return nil, err
	}
	o.View.CPUs = ClampCPUs(o.View.CPUs, runtime.NumCPU())
	pl := &planner{p: &plan.Plan{}}
	for _, s := range hostSteps {
		pl.what = s.what
		if err := s.plan(pl, newRoot, o); err != nil {
			return nil, fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return pl.p, nil
}

// holdEtc opens the /etc template for the Go init, at the lowest free
// descriptor: the Go runtime and the init hold descriptors of their own
// (cgroup files, the poller) at numbers no plan can know.
func holdEtc(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the /etc template %q: %w", dir, err)
	}
	return fd, nil
}

// closeLogged closes fd, logging a failure: nothing is left to undo.
func closeLogged(fd int, what string) {
	if err := unix.Close(fd); err != nil {
		slog.Warn("closing "+what, "err", err)
	}
}

// checkHost refuses Options a root on the host's /usr cannot be built
// from.
func checkHost(o Options) error {
	if o.Image != nil {
		return errors.New("building the root: a template's root is built step by step (Build), not planned")
	}
	if o.Etc.Dir == "" {
		return errors.New("building /etc: no /etc template was given")
	}
	return nil
}

// buildStep is one step of Build, named for its error: planned (plan),
// or one that reads the tree it builds and makes its calls itself (run).
type buildStep struct {
	what string
	plan func(*planner, string, Options) error
	run  func(string, Options) error
}

// hostSteps build a root on the host's /usr and curated /etc.
var hostSteps = []buildStep{
	{what: "", plan: openEtc},
	{what: "making mounts private", plan: makePrivate},
	{what: "mounting root tmpfs", plan: mountRoot},
	{what: "binding /usr", plan: bindUsr},
	{what: "building /etc", plan: buildEtc},
	{what: "building writable dirs", plan: buildScratch},
	{what: "building /dev", plan: buildDev},
	{what: "mounting /proc", plan: buildProc},
	{what: "showing the sandbox its own /proc and /sys", plan: buildView},
	{what: "pivoting root", plan: pivot},
}

// imageSteps build a root on a template's tree (Options.Image): the same
// as hostSteps, but the template's entries and /etc come after the
// scratch, whose tmpfs holds the template's mount while it is used, and
// the template's home and /workspace are copied into the scratch.
var imageSteps = []buildStep{
	{what: "making mounts private", plan: makePrivate},
	{what: "mounting root tmpfs", plan: mountRoot},
	{what: "building writable dirs", plan: buildScratch},
	{what: "binding the template's root", run: bindImage},
	{what: "copying the template's home and /workspace", run: seedImage},
	{what: "building /dev", plan: buildDev},
	{what: "mounting /proc", plan: buildProc},
	{what: "showing the sandbox its own /proc and /sys", plan: buildView},
	{what: "pivoting root", plan: pivot},
}

// openEtc holds the /etc template by a descriptor (EtcFD) for buildEtc,
// unless the caller holds it already (Build).
func openEtc(pl *planner, _ string, o Options) error {
	if pl.etcHeld {
		return nil
	}
	pl.etcFD = EtcFD
	pl.add(plan.OpenFD, []uint64{unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW, EtcFD}, []string{o.Etc.Dir},
		fmt.Sprintf("opening the /etc template %q", o.Etc.Dir))
	return nil
}

func makePrivate(pl *planner, _ string, _ Options) error {
	pl.mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
	return nil
}

// rootDirs are made in the root tmpfs, and scratchDir last.
var rootDirs = []string{"etc", "dev", "proc", "tmp", "workspace", "home", "home/sandbox", "run", scratchDir}

func mountRoot(pl *planner, root string, o Options) error {
	pl.mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsData("0755", 4*1024*1024, 4096, o.UID, o.GID))
	for _, d := range rootDirs {
		pl.mkdir(filepath.Join(root, d), 0o755)
	}
	if o.Image != nil {
		return nil // the template's /usr, and its /var or makeVar's
	}
	pl.mkdir(filepath.Join(root, "usr"), 0o755)
	pl.mkdir(filepath.Join(root, "var"), 0o755)
	pl.symlink("../tmp", filepath.Join(root, "var/tmp"))
	return nil
}

func bindUsr(pl *planner, root string, _ Options) error {
	pl.bindRO("/usr", filepath.Join(root, "usr"), true)
	for _, name := range UsrMergeLinks {
		if err := mirror(pl, "/"+name, filepath.Join(root, name)); err != nil {
			return err
		}
	}
	return nil
}

// mirror recreates host path src at dst as a template has it (see
// classify), binding a bound entry at once: a usr-merged host's links, or
// the directories of one that is not. It reads src on the host now.
func mirror(pl *planner, src, dst string) error {
	e, _ := classify(src, searchable{})
	switch e.kind {
	case entryLink:
		pl.symlink(e.target, dst)
	case entryCopied:
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		pl.writeFile(dst, string(b), 0o644)
	case entryBound:
		if e.dir {
			pl.mkdir(dst, 0o755)
		} else {
			pl.touch(dst)
		}
		pl.bindRO(src, dst, true)
	}
	return nil
}

// maxCopiedFile bounds the host files a template copies rather than binds:
// a copy costs a few pages once per host, a bind two mount operations
// under the namespace lock in every sandbox.
const maxCopiedFile = 256 << 10

// buildEtc binds the host's /etc template read-only, then binds the
// host entries it leaves to be bound over their mount points.
func buildEtc(pl *planner, root string, o Options) error {
	etc := filepath.Join(root, "etc")
	pl.bindRO("/proc/self/fd/"+strconv.Itoa(pl.etcFD), etc, false)
	if !pl.etcHeld {
		pl.add(plan.Close, []uint64{uint64(pl.etcFD)}, nil, "closing the /etc template")
	}
	for _, name := range o.Etc.Binds {
		pl.bindRO(filepath.Join("/etc", name), filepath.Join(etc, name), true)
	}
	return nil
}

// scratchDirs are the scratch tmpfs's directories and their modes;
// scratchBinds where the sandbox sees them (the workspace's unless the
// host gave one, and shm's in buildDev).
var (
	scratchDirs = []struct {
		name string
		mode uint32
	}{{"tmp", 0o1777}, {"home", 0o755}, {"shm", 0o1777}, {"workspace", 0o755}}
	scratchBinds = [][2]string{{"tmp", "tmp"}, {"home", "home/sandbox"}}
)

// buildScratch mounts one tmpfs with the disk and inode limits and binds its
// subdirectories to /workspace, /tmp, /home/sandbox and /dev/shm later, so
// the limit bounds them together rather than each.
func buildScratch(pl *planner, root string, o Options) error {
	scratch := filepath.Join(root, scratchDir)
	if o.HostScratch {
		return bindHostScratch(pl, root, o)
	}
	pl.mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, scratchTmpfsData(o.DiskBytes, o.Inodes, o.UID, o.GID))
	for _, d := range scratchDirs {
		p := filepath.Join(scratch, d.name)
		pl.mkdir(p, 0o755)
		pl.chmod(p, d.mode)
	}
	binds := scratchBinds
	if o.WorkspaceFD < 0 {
		binds = append(binds[:len(binds):len(binds)], [2]string{"workspace", "workspace"})
	} else {
		attachWorkspace(pl, o, filepath.Join(root, "workspace"))
	}
	for _, b := range binds {
		pl.mount(filepath.Join(scratch, b[0]), filepath.Join(root, b[1]), "", unix.MS_BIND, "")
	}
	if o.Image != nil {
		return nil // a template's home is seeded from its tree instead
	}
	return writeHomeFiles(pl, filepath.Join(scratch, "home"), o.HomeFiles)
}

// writeHomeFiles writes files into home, making their parents; the init's
// file identity (the sandbox user) owns what it makes.
func writeHomeFiles(pl *planner, home string, files []HomeFile) error {
	if err := CheckHomeFiles(files); err != nil {
		return err
	}
	for _, f := range files {
		dir := "."
		for _, elem := range strings.Split(filepath.Dir(f.Path), "/") {
			if elem == "." {
				continue
			}
			dir = filepath.Join(dir, elem)
			pl.mkdirOK(filepath.Join(home, dir), 0o755, unix.EEXIST)
		}
		pl.writeFile(filepath.Join(home, f.Path), string(f.Data), 0o644)
	}
	return nil
}

// bindHostScratch puts the host's scratch tmpfs where the sandbox's own
// would be and binds its directories in place: the host made them (see
// MountScratch), and its size is the disk limit.
func bindHostScratch(pl *planner, root string, o Options) error {
	scratch := filepath.Join(root, scratchDir)
	attachWorkspace(pl, o, scratch)
	for _, d := range []string{"tmp", "home", "workspace", "shm"} {
		pl.add(plan.CheckDir, nil, []string{filepath.Join(scratch, d)}, fmt.Sprintf("the host's scratch has no directory %q", d))
	}
	for _, b := range append(scratchBinds[:len(scratchBinds):len(scratchBinds)], [2]string{"workspace", "workspace"}) {
		pl.mount(filepath.Join(scratch, b[0]), filepath.Join(root, b[1]), "", unix.MS_BIND, "")
	}
	return nil
}

// attachWorkspace puts the host's workspace at dst, read-write, without
// set-uid or device files taking effect: a detached mount is moved into
// place as it is, a directory is bound.
func attachWorkspace(pl *planner, o Options, dst string) {
	if o.WorkspaceIsMount {
		pl.add(plan.MoveMount, []uint64{uint64(o.WorkspaceFD)}, []string{dst}, fmt.Sprintf("moving workspace mount to %q", dst))
		return
	}
	pl.mount("/proc/self/fd/"+strconv.Itoa(o.WorkspaceFD), dst, "", unix.MS_BIND, "")
	pl.restrict(dst, noDevice, false)
}

func buildDev(pl *planner, root string, o Options) error {
	dev := filepath.Join(root, "dev")
	from := o.Devices
	if from == "" {
		from = "/dev"
	}
	pl.mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, tmpfsData("0755", 64*1024, 64, -1, -1))
	what := pl.what
	for _, d := range Devices {
		pl.what = what + ": /dev/" + d.Name
		bindDevice(pl, what, filepath.Join(from, d.Name), filepath.Join(dev, d.Name), d)
	}
	pl.what = what
	for _, name := range slices.Sorted(maps.Keys(DevLinks)) {
		pl.symlink(DevLinks[name], filepath.Join(dev, name))
	}
	shm := filepath.Join(dev, "shm")
	pl.mkdir(shm, 0o755)
	pl.mount(filepath.Join(root, scratchDir, "shm"), shm, "", unix.MS_BIND, "")
	pl.add(plan.Umount, []uint64{unix.MNT_DETACH}, []string{filepath.Join(root, scratchDir)}, "detaching scratch")
	pl.add(plan.Rmdir, nil, []string{filepath.Join(root, scratchDir)}, "remove "+filepath.Join(root, scratchDir))
	pl.restrict(dev, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
	return nil
}

// bindDevice binds the node src at dst read-only, refusing anything but
// d's character device. Writes to a device on a read-only mount still
// work; changing its times does not (EROFS): the node's inode is shared
// with every other sandbox (and the host's, rootless), so its mtime would
// be a channel between them.
// The check's error reads as step's, without the device's name twice.
func bindDevice(pl *planner, step, src, dst string, d Device) {
	pl.touch(dst)
	pl.mount(src, dst, "", unix.MS_BIND, "")
	what := pl.what
	pl.what = step
	pl.add(plan.CheckChrdev, []uint64{uint64(d.Major), uint64(d.Minor)}, []string{dst},
		fmt.Sprintf("%s is not the character device %d:%d", src, d.Major, d.Minor))
	pl.what = what
	pl.restrict(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
}

// buildProc mounts the PID namespace's own /proc while the host's is still
// visible (the kernel refuses a new proc mount in a user namespace unless an
// unobstructed one exists), then masks what leaks host state. Each mask's
// kind is fixed (maskedProcDirs), not read from the /proc warden sees,
// which may show less than the sandbox's (subset=pid); an entry the
// sandbox's kernel lacks has nothing to hide (ENOENT).
func buildProc(pl *planner, root string, _ Options) error {
	proc := filepath.Join(root, "proc")
	pl.mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	for _, name := range MaskedProcPaths {
		mask(pl, filepath.Join(proc, name), maskedProcDirs[name], filepath.Join(root, "dev/null"))
	}
	for _, name := range ReadonlyProcPaths {
		p := filepath.Join(proc, name)
		pl.mountOK(p, p, "", unix.MS_BIND|unix.MS_REC, "", unix.ENOENT)
		pl.restrictOK(p, readOnly|unix.MOUNT_ATTR_NOEXEC, true, unix.ENOENT)
	}
	return nil
}

// maskedProcDirs are the MaskedProcPaths that are directories; the rest
// are files.
var maskedProcDirs = map[string]bool{"acpi": true, "asound": true, "scsi": true, "pressure": true, "irq": true, "fs": true}

// mask hides the /proc entry at p: a directory under an empty read-only
// tmpfs, a file under /dev/null.
func mask(pl *planner, p string, dir bool, devNull string) {
	if dir {
		pl.mountOK("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,nr_inodes=1,mode=0555", unix.ENOENT)
		return
	}
	pl.mountOK(devNull, p, "", unix.MS_BIND, "", unix.ENOENT)
}

// pivot makes root the new "/" and detaches the host tree. pivot_root(".",
// ".") stacks the old root on top of the new one, so one lazy unmount of "."
// removes every host mount from the namespace.
func pivot(pl *planner, root string, _ Options) error {
	pl.add(plan.Chdir, nil, []string{root}, "")
	pl.add(plan.PivotRoot, nil, nil, "pivot_root")
	pl.add(plan.Umount, []uint64{unix.MNT_DETACH}, []string{"."}, "detaching old root")
	pl.add(plan.Chdir, nil, []string{"/"}, "")
	pl.restrict("/", readOnly, false)
	return nil
}
