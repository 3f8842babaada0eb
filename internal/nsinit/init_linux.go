package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/scratch"
)

// newRoot is where the sandbox root is assembled before pivot_root. The
// mount namespace is private, so covering the host's /tmp here hides it
// from nobody but the sandbox.
const newRoot = "/tmp"

// Main runs the init and never returns. It must be called before anything
// else in the process starts goroutines that could migrate between threads:
// every credential and namespace change below is per thread, and the user's
// program is forked from this same locked thread so it inherits them.
// Asked for its version (IsProbe), it prints Version and exits instead.
func Main() {
	runtime.LockOSThread()
	if IsProbe(os.Args) {
		fmt.Println(Version)
		os.Exit(0)
	}
	if isBoxed() && len(os.Args) > 1 && os.Args[1] == boxedUserAgent {
		os.Exit(userAgent(os.Args[2:]))
	}
	if isBoxed() && len(os.Args) > 1 && os.Args[1] == boxedPodExec {
		os.Exit(podExec(os.Args[2:]))
	}
	if isBoxed() {
		serveBoxed(os.Args[1:])
	}
	os.Exit(run())
}

// ServeBoxedStdin is the boxed agent, run in this very process as
// `BoxedPath BoxedStdin` runs it after an exec: for a microVM guest's
// init (vmguest), which built the box itself and would otherwise start a
// second Go runtime, under emulation, only to become the agent. The
// control connection is fd 0; the caller has set the environment the
// agent's processes inherit and runs on its locked main thread, as Main
// requires. It never returns. Its executable is then the initramfs's
// /init below the box's root, so nothing it runs may resolve files beside
// its own executable (findInit, Binary, BinaryPath, Executor): those are
// the host's way to its binaries, and here they would look in the image's
// root for warden-init and warden-exec.
func ServeBoxedStdin() {
	runtime.LockOSThread()
	boxedHere = true
	serveBoxed([]string{BoxedStdin})
}

// serveBoxed takes the control connection as args say (boxedControl) and
// serves it as the boxed agent; it never returns.
func serveBoxed(args []string) {
	if err := boxedControl(args); err != nil {
		fmt.Fprintf(os.Stderr, "warden-init: connecting to the host: %v\n", err)
		os.Exit(exitNoHost)
	}
	os.Exit(run())
}

func run() int {
	// a valid clock and address: clock_gettime(2) cannot fail
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &bootClock)
	ctl := os.NewFile(ControlFD, "control")
	// Non-dumpable: the user's code may share our uid (rootless) and must
	// not read our memory or descriptors through /proc/1.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	guardSignals()

	cfg, err := readConfig(ctl)
	if err != nil {
		return refuse(ctl, err)
	}
	if cfg.Session {
		return session(&cfg, ctl)
	}
	st := start(&cfg)
	if err := json.NewEncoder(ctl).Encode(st); err != nil {
		return exitNoHost
	}
	return 0
}

// refuse answers a Config the init could not read with one Refusal line,
// unless the host hung up before sending it whole.
func refuse(ctl *os.File, err error) int {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return exitNoHost
	}
	// the host reads this; it fails only once the host hung up, and then nobody is left to tell
	_ = json.NewEncoder(ctl).Encode(NewRefusal(err.Error()))
	if isBoxed() {
		// Also where the runtime logs, which the host reads when the box
		// ends before the line arrives.
		fmt.Fprintf(os.Stderr, "warden-init: %v\n", err)
	}
	return exitRefused
}

// guardSignals makes the init immune to signals from the program when the
// program could send them: only when both run as the same host uid (the
// rootless mapping, or a Pod, where both are the Pod's uid). As root, the
// init keeps the host's uid, which is not mapped in the sandbox, and the
// kernel already refuses the program's kill.
// The guard costs a signal-handling thread, over a millisecond of start-up,
// hence the condition. It catches and drops rather than ignores: an ignored
// disposition would be inherited by the program across exec, a caught one
// is reset to the default.
func guardSignals() {
	if os.Geteuid() != SandboxUID && !podMode {
		return
	}
	// Every catchable signal: a SIGABRT or SIGSEGV sent with kill would
	// otherwise make the Go runtime crash the init with a stack dump.
	signal.Notify(make(chan os.Signal, 1))
	// The few Go will not relay (glibc's 32 and 33, among others) stay at
	// their deadly default; ignore those. unignoreSignals undoes it for
	// the program.
	ignoreDefaulted()
}

// start builds the sandbox, runs the program and waits for it.
func start(cfg *Config) Status {
	if err := setup(cfg); err != nil {
		return Status{Error: err.Error()}
	}
	path, err := lookPath(cfg.Command[0], cfg.Env, seenRoot(cfg))
	if err != nil {
		return lookupFailed(err)
	}
	pid, err := spawn(path, cfg)
	var lock lockdownError
	switch {
	case errors.As(err, &lock):
		return Status{Error: err.Error()}
	case err != nil:
		return startFailed(cfg.Command[0], err)
	}
	// The program has its own copy of stdin; the init keeps none (a
	// listener handed in, say, with native.Runtime.ListenerStdin), as the
	// boxed agent does. A failure ends the run rather than leave it open.
	if err := nullStdin(); err != nil {
		if kerr := unix.Kill(pid, unix.SIGKILL); kerr != nil {
			fmt.Fprintf(os.Stderr, "warden-init: killing the program: %v\n", kerr)
		}
		reap(pid)
		return Status{Error: "pointing the init's stdin at /dev/null: " + err.Error()}
	}
	return reap(pid)
}

// session builds the sandbox and serves it as a session's agent.
func session(cfg *Config, ctl *os.File) int {
	if err := setup(cfg); err != nil {
		// the host reads this; it fails only once the host hung up, and then nobody is left to tell
		_ = json.NewEncoder(ctl).Encode(Event{Kind: EventFailed, Status: &Status{Error: err.Error()}})
		if cfg.Boxed {
			// Also where the runtime logs, which the host reads when the
			// box ends before the event arrives.
			fmt.Fprintf(os.Stderr, "warden-init: building the sandbox: %v\n", err)
		}
		return 0
	}
	if cfg.Boxed {
		// The runtime's log was only for the failure above; gVisor shows
		// the init's descriptors to the user, so nothing of the host's
		// stays open.
		if err := nullOutput(); err != nil {
			// the host reads this; it fails only once the host hung up, and then nobody is left to tell
			_ = json.NewEncoder(ctl).Encode(Event{Kind: EventFailed, Status: &Status{Error: "closing the runtime's log: " + err.Error()}})
			return 0
		}
	}
	if cfg.HideAgent {
		return serveThroughUserAgent(cfg, ctl)
	}
	return serveSession(cfg, ctl)
}

// setup takes the init from "fresh namespaces" to "ready to exec": each
// step names itself in the error so a host problem is easy to diagnose.
func setup(cfg *Config) error {
	steps := nativeSteps()
	switch {
	case podMode:
		steps = podSteps()
	case cfg.Boxed:
		steps = boxedSteps()
	}
	for _, s := range steps {
		if err := s.fn(cfg); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// setupStep is one step of setup, named for its error.
type setupStep struct {
	what string
	fn   func(*Config) error
}

// nativeSteps build the box from fresh namespaces.
func nativeSteps() []setupStep {
	return []setupStep{
		{"joining the cgroup", joinCgroup},
		{"entering a cgroup namespace", func(*Config) error {
			return plan.ApplyOne(plan.Op{Code: plan.Unshare, Ints: []uint64{unix.CLONE_NEWCGROUP}})
		}},
		{"closing inherited descriptors", func(*Config) error {
			return plan.ApplyOne(plan.Op{Code: plan.CloseRange, Ints: []uint64{ControlFD, ^uint64(0), unix.CLOSE_RANGE_CLOEXEC}})
		}},
		{"reopening the workspace", reopenWorkspace},
		{"reopening the template's root", reopenRoot},
		{"opening oom_score_adj", openOOMScore},
		{"limiting SysV IPC", limitSessionIPC},
		{"setting file identity", setFileIdentity},
		{"tying the sandbox to the host", func(*Config) error { return dieWithHost() }},
		{"setting hostname", func(c *Config) error { return unix.Sethostname([]byte(c.Hostname)) }},
		{"bringing up lo", func(*Config) error { return loopbackUp() }},
		{"starting the egress bridge", startBridge},
		{"building the root", buildRoot},
		{"limiting the CPUs in view", limitCPUs},
		{"setting rlimits", setRlimits},
	}
}

// limitCPUs narrows the CPUs the program may use to its view's count:
// plan.NarrowCPUs, which warden-exec applies as op LimitCPUs.
func limitCPUs(cfg *Config) error { return plan.NarrowCPUs(cfg.View.CPUs) }

func buildRoot(cfg *Config) (err error) {
	var img *rootfs.ImageRoot
	if cfg.Root != "" {
		img = &rootfs.ImageRoot{FD: RootFD, IsMount: cfg.RootIsMount}
	}
	var seed *rootfs.ImageRoot
	if cfg.SeedMount {
		seed = &rootfs.ImageRoot{FD: SeedFD, IsMount: true}
		// Once copied, the idmapped tree (where root-only files are the
		// sandbox user's) is not kept open for the session; if it cannot
		// be closed the sandbox does not start.
		defer closeSeed(&err)
	}
	o := rootOptions(cfg)
	o.Image, o.Seed, o.SeedFrom = img, seedScratch(cfg.Template), seed
	return rootfs.Build(newRoot, o)
}

// rootOptions are the rootfs.Options of cfg's root on the host's /usr,
// which a template's root adds its tree to: the one source of both
// executors' roots (buildRoot, ExecPlan).
func rootOptions(cfg *Config) rootfs.Options {
	ws := -1
	if cfg.Workspace {
		ws = WorkspaceFD
	}
	return rootfs.Options{
		DiskBytes: cfg.DiskBytes, Inodes: cfg.Inodes, WorkspaceFD: ws, WorkspaceIsMount: cfg.WorkspaceIsMount, HostScratch: cfg.HostScratch,
		UID: SandboxUID, GID: SandboxGID, Etc: cfg.Etc, View: cfg.View, Devices: cfg.Devices, Hostname: cfg.Hostname,
		HomeFiles: cfg.HomeFiles,
	}
}

// closeSeed closes SeedFD, adding its failure to *err.
func closeSeed(err *error) {
	if cerr := unix.Close(SeedFD); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("closing the template's seed tree: %w", cerr))
	}
}

// seedScratch is rootfs.Options.Seed for template name: the template's
// places scratch.Kept names, without /workspace when the host's is bound
// there, its errors naming the template.
func seedScratch(name string) func(dir, tree string, withWorkspace bool) error {
	return func(dir, tree string, withWorkspace bool) error {
		names := scratch.Kept
		if !withWorkspace {
			names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "workspace" })
		}
		if err := scratch.Seed(dir, tree, names); err != nil {
			return fmt.Errorf("template %q: %w", name, err)
		}
		return nil
	}
}

// reopenRoot is reopenWorkspace for a template's root the host passed as
// a directory (rootless) rather than a detached mount.
func reopenRoot(cfg *Config) error {
	if cfg.Root == "" || cfg.RootIsMount {
		return nil
	}
	return reopenAt(cfg.Root, RootFD)
}

// reopenWorkspace replaces the host's workspace descriptor with the same
// directory opened in this mount namespace, because the kernel refuses to
// bind a directory from another one. The path is opened without following
// any link and must lead to the very directory the host opened; a detached
// idmapped mount needs none of this.
func reopenWorkspace(cfg *Config) error {
	if !cfg.Workspace || cfg.WorkspaceIsMount {
		return nil
	}
	return reopenAt(cfg.WorkspacePath, WorkspaceFD)
}

// reopenAt opens the directory at path in this mount namespace, without
// following a link, and puts it at hostFD if it is the very directory
// the host opened there.
func reopenAt(path string, hostFD int) error {
	fd, err := OpenWorkspace(path)
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	defer unix.Close(fd)
	var mine, hosts unix.Stat_t
	if err := unix.Fstat(fd, &mine); err != nil {
		return err
	}
	if err := unix.Fstat(hostFD, &hosts); err != nil {
		return err
	}
	if mine.Dev != hosts.Dev || mine.Ino != hosts.Ino {
		return fmt.Errorf("%q changed while the sandbox started", path)
	}
	return unix.Dup3(fd, hostFD, unix.O_CLOEXEC)
}

// joinCgroup waits for the cgroup v1 tasks descriptors the host sends once
// it has made the cgroup, moves this thread (the one the program will be
// forked from) into every hierarchy, and closes them: the program must
// never hold them, or it could move itself out. The thread that answers
// sysinfo(2) joins too (startAnswerer), so its CPU is the sandbox's.
func joinCgroup(cfg *Config) error {
	if !cfg.AwaitCgroup {
		return nil
	}
	fds, err := receiveFDs(ControlFD)
	if err != nil {
		return fmt.Errorf("receiving the cgroup: %w", err)
	}
	if !cfg.KernelSysinfo {
		dups, err := dupAll(fds)
		if err != nil {
			closeAll(fds)
			return err
		}
		startAnswerer(dups, openMemoryUsage(fds), cfg.View.MemoryBytes)
	}
	var first error
	for i, fd := range fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil && first == nil {
			first = fmt.Errorf("writing tasks file %d: %w", i, err)
		}
		unix.Close(fd)
	}
	return first
}

// dupAll duplicates fds (close-on-exec), all or none.
func dupAll(fds []int) ([]int, error) {
	dups := make([]int, 0, len(fds))
	for _, fd := range fds {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeAll(dups)
			return nil, fmt.Errorf("duplicating the cgroup's descriptors: %w", err)
		}
		dups = append(dups, d)
	}
	return dups, nil
}

// maxCgroupFiles bounds the descriptors accepted with the cgroup: one per
// v1 hierarchy Warden uses, four today.
const maxCgroupFiles = 8

// receiveFDs reads the one byte the host sends with descriptors attached
// (plan.ReceiveRights, which warden-exec's cgroup join mirrors); a host
// that hung up is io.ErrUnexpectedEOF, as for the Config.
func receiveFDs(sock int) ([]int, error) {
	fds, err := plan.ReceiveRights(sock, maxCgroupFiles)
	if errors.Is(err, unix.EPIPE) {
		return nil, io.ErrUnexpectedEOF
	}
	return fds, err
}

// setFileIdentity drops the supplementary groups inherited from the host
// and makes files the init creates belong to the sandbox user, the only id
// mapped into the user namespace. Both are per thread, like everything the
// child inherits from this locked thread. It is op FileIdentity, which
// warden-exec applies the same way.
func setFileIdentity(*Config) error {
	return plan.ApplyOne(plan.Op{Code: plan.FileIdentity, Ints: []uint64{uint64(userUID), uint64(userGID)}})
}

// dieWithHost makes the kernel kill the init, and so the whole PID
// namespace, when the host process goes. It must follow every credential
// change (the kernel clears the setting when euid or fsuid change), and a
// host that died before it took effect shows as a hung-up control socket
// (EPIPE). It is op DieWithHost.
func dieWithHost() error {
	return plan.ApplyOne(plan.Op{Code: plan.DieWithHost, Ints: []uint64{uint64(unix.SIGKILL), ControlFD}})
}

// loopbackUp brings up lo: op LinkUp.
func loopbackUp() error { return plan.ApplyOne(plan.Op{Code: plan.LinkUp, Strs: []string{"lo"}}) }

func setRlimits(cfg *Config) error {
	for _, l := range rlimits(cfg) {
		if l.val == 0 {
			continue
		}
		// syscall.Setrlimit, not unix: Go remembers RLIMIT_NOFILE for its
		// children and must see the new value.
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return fmt.Errorf("%s=%d: %w", l.name, l.val, err)
		}
	}
	return nil
}

// rlimit is one limit setRlimits sets, soft and hard, unless val is 0.
type rlimit struct {
	name string
	res  int
	val  uint64
}

// rlimits are the limits of cfg's program, in the order both executors
// set them (setRlimits, ExecPlan).
func rlimits(cfg *Config) []rlimit {
	return []rlimit{
		{"RLIMIT_CPU", unix.RLIMIT_CPU, cfg.Rlimits.CPUSeconds},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, cfg.Rlimits.FileSizeBytes},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, cfg.Rlimits.OpenFiles},
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, processLimit(cfg)},
		// 1, not 0: a core_pattern that pipes to a host helper ignores a
		// zero limit, but the kernel reads 1 as "never dump", and a file
		// dump needs at least a page.
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 1},
	}
}

// reap waits for the program while reaping every orphan the PID namespace
// hands to its init; the rest of the sandbox dies when the init exits.
func reap(pid int) Status {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return Status{Error: fmt.Sprintf("waiting for the program: %v", err)}
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			return Status{ExitCode: ws.ExitStatus()}
		case ws.Signaled():
			return Status{ExitCode: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
		}
	}
}
