package microvm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/plan"
)

// launch holds what one QEMU start needs, opened by the host: QEMU gets
// its descriptors (stdio, the agent socket), and its own root holds the
// rest as read-only binds of what the host opened (confine_linux.go).
type launch struct {
	cfg     Config
	accel   AccelChoice
	qemu    *os.File // O_PATH of the trusted binary, bound as qemuBinary
	devNull *os.File
	logR    *os.File // host end of the console pipe
	logW    *os.File
	kernel  *os.File
	initrd  *os.File // an initrd file (InitrdPath, InitrdFile), or nil: its bytes are written into QEMU's root
	guest   *os.File // QEMU's end of the agent socketpair
	host    *os.File
	// qmpGuest and qmpHost are the QMP socketpair's ends on a cgroup v2
	// host, where QEMU starts stopped until settle moves it into its
	// cgroup; nil on v1, where it is born inside.
	qmpGuest, qmpHost *os.File
	mounts            []mountAt     // QEMU's root's binds, detached until its thread attaches them
	id                *hostid.Lease // QEMU's own uid and gid, no other process's
	cg                cgroup.Cgroup
	// tasks and ownTasks are the tasks files (v1) of cg and of warden's
	// cgroups, which QEMU's thread joins before it forks QEMU and returns
	// to after (joinCgroup).
	tasks, ownTasks []*os.File
	started         time.Time
	// exited is closed once QEMU has exited, which ends the thread that
	// forked it (fork).
	exited chan struct{}
}

// prepare opens everything; on failure it closes what it opened.
func prepare(cfg Config) (l *launch, err error) {
	l = &launch{cfg: cfg, exited: make(chan struct{})}
	defer func() {
		if err != nil {
			l.closeFiles()
			l.closeHostEnds()
		}
	}()
	l.accel = pickAccel(cfg)
	if err := cfg.checkAccel(l.accel.Accel); err != nil {
		return l, err
	}
	if err := l.openQEMU(); err != nil {
		return l, err
	}
	if l.devNull, err = os.Open(os.DevNull); err != nil {
		return l, fmt.Errorf("microvm: opening %s: %w", os.DevNull, err)
	}
	if l.logR, l.logW, err = os.Pipe(); err != nil {
		return l, fmt.Errorf("microvm: making the console pipe: %w", err)
	}
	if l.kernel, err = openKernel(cfg); err != nil {
		return l, err
	}
	if l.initrd, err = openInitrd(cfg); err != nil {
		return l, err
	}
	if err := l.rootMounts(); err != nil {
		return l, err
	}
	if l.host, l.guest, err = socketPair(); err != nil {
		return l, err
	}
	if l.id, err = leaseID(cfg); err != nil {
		return l, fmt.Errorf("microvm: QEMU's identity: %w", err)
	}
	return l, l.makeCgroup()
}

// leaseID is the caller's lease (Config.ID), or one for this VM alone.
func leaseID(cfg Config) (*hostid.Lease, error) {
	if cfg.ID != nil {
		return cfg.ID, nil
	}
	return hostid.Take()
}

// pickAccel is cfg's accelerator, or the host's.
func pickAccel(cfg Config) AccelChoice {
	if cfg.Accel != "" {
		return AccelChoice{cfg.Accel, "asked for"}
	}
	return HostAccel()
}

// start execs QEMU confined and returns the VM before its hello. The
// host ends (console pipe, agent socket) pass to the VM, or are closed.
func (l *launch) start() (*VM, error) {
	cmd, err := l.command()
	if err == nil {
		err = inheritedCloseOnExec()
	}
	if err != nil {
		l.closeHostEnds()
		return nil, err
	}
	probePidfd()
	started := make(chan error, 1)
	go l.fork(cmd, started)
	if err := <-started; err != nil {
		l.closeHostEnds()
		return nil, err
	}
	conn, err := l.settle(cmd.Process.Pid)
	if err != nil {
		stopQEMU(cmd)
		close(l.exited)
		l.closeHostEnds()
		return nil, err
	}
	vm := &VM{cmd: cmd, conn: conn, id: l.id, ownID: l.cfg.ID == nil, cg: l.cg, accel: l.accel, done: make(chan struct{}), forker: l.exited, console: newConsoleLog(l.logR)}
	go vm.reap()
	return vm, nil
}

// fork confines the calling goroutine's thread (its own namespaces and
// root, no_new_privs, Warden's filter for QEMU), forks QEMU from it
// inside QEMU's cgroup (joining it just for the fork; if it cannot
// rejoin warden's, QEMU is killed and reaped: it fails closed), says
// on started how that went, and keeps the thread until QEMU has exited
// (l.exited, closed by whoever sees it exit):
// Pdeathsig fires when the thread that forked QEMU ends, not warden, so
// QEMU lives exactly as long as this goroutine, and no other goroutine's
// locked thread ending (which the Go runtime then kills) takes QEMU with
// it. The thread is never unlocked: it stays confined, so the runtime
// ends it with the goroutine rather than run other goroutines in QEMU's
// namespaces under QEMU's filter. Everything that needs the host's files
// (the cgroup's creation and removal, the reaper's clean-up) runs on other
// goroutines; the cgroup is joined through files opened before.
func (l *launch) fork(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread()
	if onMainThread() {
		// Keep the main thread busy, so the new goroutine gets another.
		relay := make(chan error, 1)
		go l.fork(cmd, relay)
		err := <-relay
		runtime.UnlockOSThread()
		started <- err
		return
	}
	if err := l.confine(); err != nil {
		started <- err
		return
	}
	if err := joinCgroup(l.tasks); err != nil {
		started <- err
		return
	}
	l.started = time.Now()
	err := cmd.Start()
	lerr := joinCgroup(l.ownTasks)
	switch {
	case err != nil:
		if lerr != nil {
			warn("moving QEMU's thread back to warden's cgroup (the thread ends now, leaving it)", lerr)
		}
		started <- fmt.Errorf("microvm: starting QEMU: %w", err)
		return
	case lerr != nil:
		stopQEMU(cmd)
		started <- fmt.Errorf("%w; QEMU was stopped rather than run beside a thread of warden counted to its cgroup", lerr)
		return
	}
	started <- nil
	<-l.exited
}

// stopQEMU kills and reaps a QEMU that start will not hand on.
func stopQEMU(cmd *exec.Cmd) {
	if err := cmd.Process.Kill(); err != nil {
		warn("killing QEMU", err)
	}
	warn("reaping QEMU", cmd.Wait())
}

// confine confines the calling thread: QEMU's namespaces and root
// (rootPlan, writeInitrd), then no_new_privs and Warden's filter. It
// refuses the process's main thread, which the runtime never ends: it
// would stay confined, and /proc/<warden's pid> (its mounts, its root)
// would show QEMU's namespaces.
func (l *launch) confine() error {
	if onMainThread() {
		return errors.New("microvm: confining QEMU: refusing to confine warden's main thread, which would stay in QEMU's namespaces; start QEMU from another goroutine")
	}
	build, seal := l.rootPlan()
	if err := plan.Apply(build); err != nil {
		return fmt.Errorf("microvm: %w", err)
	}
	if err := l.writeInitrd(); err != nil {
		return err
	}
	if err := plan.Apply(seal); err != nil {
		return fmt.Errorf("microvm: %w", err)
	}
	return confineThread()
}

// settle turns the agent socket into a connection and, on cgroup v2,
// moves the stopped QEMU into its cgroup and only then lets its guest run
// (QMP cont): QEMU's own set-up before that, which runs no guest code, is
// counted to warden's cgroup. On v1 QEMU was born inside (joinCgroup).
func (l *launch) settle(pid int) (net.Conn, error) {
	if l.qmpHost != nil {
		if err := l.cg.AddProc(pid); err != nil {
			return nil, fmt.Errorf("microvm: moving QEMU into its cgroup: %w", err)
		}
		if err := l.cont(); err != nil {
			return nil, err
		}
	}
	conn, err := fileConn(l.host)
	l.host = nil
	return conn, err
}

// cont continues the stopped QEMU over QMP, within qmpTimeout, and closes
// the host's end of the monitor.
func (l *launch) cont() error {
	c, err := net.FileConn(l.qmpHost)
	closeLogged(l.qmpHost, "QMP socket")
	l.qmpHost = nil
	if err != nil {
		return fmt.Errorf("microvm: QMP socket: %w", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			warn("closing QMP", err)
		}
	}()
	if err := c.SetDeadline(time.Now().Add(qmpTimeout)); err != nil {
		return fmt.Errorf("microvm: QMP socket: %w", err)
	}
	return qmpCont(c)
}

// openQMP makes the QMP socketpair for a QEMU started stopped.
func (l *launch) openQMP() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("microvm: socketpair for QMP: %w", err)
	}
	l.qmpHost, l.qmpGuest = os.NewFile(uintptr(fds[0]), "qmp-host"), os.NewFile(uintptr(fds[1]), "qmp-guest")
	return nil
}

// command is QEMU's command: the trusted binary, bound into QEMU's own
// root, executed with a clean environment, in /, with only its
// descriptors.
func (l *launch) command() (*exec.Cmd, error) {
	attr, err := l.sysProcAttr()
	if err != nil {
		return nil, err
	}
	argv := append([]string{"qemu-system-x86_64"}, args(l.cfg, l.accel.Accel)...)
	files := []*os.File{l.guest} // agentFD
	if l.qmpGuest != nil {
		argv = append(argv, qmpArgs()...)
		files = append(files, l.qmpGuest) // qmpFD
	}
	return &exec.Cmd{
		Path:        qemuBinary,
		Args:        argv,
		Env:         []string{},
		Dir:         "/",
		Stdin:       l.devNull,
		Stdout:      l.logW,
		Stderr:      l.logW,
		ExtraFiles:  files,
		SysProcAttr: attr,
	}, nil
}

// sysProcAttr confines QEMU: a uid and gid leased for this VM alone with
// no supplementary groups (so no capabilities: the switch from root clears
// them, and no other VM's QEMU can read its memory or signal it), its own
// process group (killed whole), killed if warden dies. Its namespaces,
// root and seccomp filter come from the thread that forks it (fork).
// Under KVM its one group is /dev/kvm's, to open it.
func (l *launch) sysProcAttr() (*syscall.SysProcAttr, error) {
	groups := []uint32{}
	if l.accel.Accel == KVM {
		gid, mode, err := kvmNode()
		if err == nil {
			err = kvmGroupUsable(gid, mode)
		}
		if err != nil {
			return nil, fmt.Errorf("microvm: %w", err)
		}
		groups = []uint32{gid}
	}
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(l.id.ID()), Gid: uint32(l.id.ID()), Groups: groups},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}, nil
}

// fileConn turns a socket's file into a connection (with deadlines, as
// streammux needs) and closes the file, which the connection duplicated.
func fileConn(f *os.File) (net.Conn, error) {
	c, err := net.FileConn(f)
	closeLogged(f, "agent socket")
	if err != nil {
		return nil, fmt.Errorf("microvm: agent socket: %w", err)
	}
	return c, nil
}

// closeFiles closes the host's copies of what QEMU inherited.
func (l *launch) closeFiles() {
	for _, f := range []*os.File{l.qemu, l.devNull, l.logW, l.kernel, l.initrd, l.guest, l.qmpGuest} {
		if f != nil {
			closeLogged(f, f.Name())
		}
	}
	for _, m := range l.mounts {
		closeLogged(m.f, m.f.Name())
	}
	for _, f := range append(l.tasks, l.ownTasks...) {
		closeLogged(f, f.Name())
	}
	l.qemu, l.devNull, l.logW, l.kernel, l.initrd, l.guest, l.qmpGuest, l.mounts, l.tasks, l.ownTasks = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// closeHostEnds closes what the host keeps, when there is no VM to own it
// (and no QEMU runs any more).
func (l *launch) closeHostEnds() {
	for _, f := range []*os.File{l.logR, l.host, l.qmpHost} {
		if f != nil {
			closeLogged(f, f.Name())
		}
	}
	if l.cg != nil {
		deleteCgroup(l.cg)
	}
	if l.id != nil && l.cfg.ID == nil {
		l.id.Release()
	}
	l.logR, l.host, l.qmpHost, l.id, l.cg = nil, nil, nil, nil, nil
}

func closeLogged(f *os.File, what string) {
	if err := f.Close(); err != nil {
		warn("closing "+what, err)
	}
}

// onMainThread says whether the calling thread is the process's first.
func onMainThread() bool { return unix.Gettid() == unix.Getpid() }

// probePidfd makes Go run its one-time pidfd probe (os.FindProcess uses
// pidfd_open) here, on an ordinary thread, if it has not yet. Otherwise
// QEMU's thread would run it at QEMU's start, after leaving the host's
// PID namespace: the probe's own child (clone with CLONE_PIDFD) would
// become that namespace's PID 1 and, exiting, end it, and QEMU's fork
// would fail.
func probePidfd() {
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		warn("finding warden's own process", err)
		return
	}
	if err := p.Release(); err != nil {
		warn("releasing warden's own process", err)
	}
}

// inheritedCloseOnExec marks, once per process (before its first QEMU),
// every descriptor above stderr close-on-exec. os/exec passes a child only
// the files it is given, but exec also keeps any descriptor not marked
// close-on-exec, and one this process inherited (a test harness's pipe, a
// shell's 9>file) is not: it would reach QEMU. Only inherited descriptors
// need it: every descriptor Go opens later is close-on-exec already, and a
// child's files are duplicated for it after the fork, so this changes
// nothing else this process does.
var inheritedCloseOnExec = sync.OnceValue(func() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("microvm: marking inherited descriptors close-on-exec (close_range, Linux 5.11): %w", err)
	}
	return nil
})
