package microvm

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/hostid"
)

// launch holds what one QEMU start needs, opened by the host: QEMU gets
// each as a descriptor and opens none of warden's files by path (it does
// open its own: firmware, libraries, /dev/urandom).
type launch struct {
	cfg     Config
	accel   AccelChoice
	qemu    *os.File // O_PATH of the trusted binary, executed as /proc/self/fd/N
	qemuFD  int      // a duplicate of qemu above the numbers the child's set-up uses
	devNull *os.File
	logR    *os.File // host end of the console pipe
	logW    *os.File
	kernel  *os.File
	initrd  *os.File
	guest   *os.File // QEMU's end of the agent socketpair
	host    *os.File
	id      *hostid.Lease // QEMU's own uid and gid, no other process's
	cg      cgroup.Cgroup
	cgDir   *os.File // the cgroup's directory for CLONE_INTO_CGROUP (v2), or nil
	started time.Time
}

// prepare opens everything; on failure it closes what it opened.
func prepare(cfg Config) (l *launch, err error) {
	l = &launch{cfg: cfg, qemuFD: -1}
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
	if l.host, l.guest, err = socketPair(); err != nil {
		return l, err
	}
	if l.id, err = leaseID(cfg); err != nil {
		return l, fmt.Errorf("microvm: QEMU's identity: %w", err)
	}
	if err := l.makeCgroup(); err != nil {
		return l, err
	}
	return l, l.dupQEMU()
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
	type result struct {
		vm  *VM
		err error
	}
	res := make(chan result, 1)
	go func() {
		// Pdeathsig fires when the thread that forked QEMU ends, not
		// warden: QEMU is started and reaped on this goroutine, locked
		// to its thread for QEMU's whole life, so no other goroutine's
		// locked thread ending (which the Go runtime then kills) can
		// take QEMU with it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		vm, err := l.run(cmd)
		res <- result{vm, err}
		if vm != nil {
			vm.reap()
		}
	}()
	r := <-res
	return r.vm, r.err
}

// run starts QEMU on the calling thread and returns the VM before its
// hello; the caller then reaps it on the same thread.
func (l *launch) run(cmd *exec.Cmd) (*VM, error) {
	l.started = time.Now()
	if err := cmd.Start(); err != nil {
		l.closeHostEnds()
		return nil, fmt.Errorf("microvm: starting QEMU: %w", err)
	}
	conn, err := l.settle(cmd.Process.Pid)
	if err != nil {
		if kerr := cmd.Process.Kill(); kerr != nil {
			warn("killing QEMU", kerr)
		}
		warn("reaping QEMU", cmd.Wait())
		l.closeHostEnds()
		return nil, err
	}
	return &VM{cmd: cmd, conn: conn, id: l.id, ownID: l.cfg.ID == nil, cg: l.cg, accel: l.accel, done: make(chan struct{}), console: newConsoleLog(l.logR)}, nil
}

// settle moves a started QEMU into its cgroup where it could not start
// inside (v1: before its guest's hello is awaited, within QEMU's first
// milliseconds of set-up) and turns the agent socket into a connection.
func (l *launch) settle(pid int) (net.Conn, error) {
	if l.cgDir == nil {
		if err := l.cg.AddProc(pid); err != nil {
			return nil, fmt.Errorf("microvm: moving QEMU into its cgroup: %w", err)
		}
	}
	conn, err := fileConn(l.host)
	l.host = nil
	return conn, err
}

// command is QEMU's command: the trusted binary's descriptor executed
// with a clean environment, in /, with only its descriptors.
func (l *launch) command() (*exec.Cmd, error) {
	attr, err := l.sysProcAttr()
	if err != nil {
		return nil, err
	}
	return &exec.Cmd{
		Path:        "/proc/self/fd/" + strconv.Itoa(l.qemuFD),
		Args:        append([]string{"qemu-system-x86_64"}, args(l.cfg, l.accel.Accel)...),
		Env:         []string{},
		Dir:         "/",
		Stdin:       l.devNull,
		Stdout:      l.logW,
		Stderr:      l.logW,
		ExtraFiles:  []*os.File{l.kernel, l.initrd, l.guest}, // kernelFD, initrdFD, agentFD
		SysProcAttr: attr,
	}, nil
}

// sysProcAttr confines QEMU: a uid and gid leased for this VM alone with
// no supplementary groups (so no capabilities: the switch from root clears
// them, and no other VM's QEMU can read its memory or signal it), its own
// process group (killed whole), killed if warden dies, and its own PID,
// network, IPC and UTS namespaces (it sees no other process to signal, no
// network interface but loopback, no host System V IPC; it still sees the
// host's files and /proc, see docs/backends.md). Under KVM its one group
// is /dev/kvm's, to open it.
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
	a := &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(l.id.ID()), Gid: uint32(l.id.ID()), Groups: groups},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
	}
	if l.cgDir != nil {
		a.UseCgroupFD, a.CgroupFD = true, int(l.cgDir.Fd())
	}
	return a, nil
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
	for _, f := range []*os.File{l.qemu, l.devNull, l.logW, l.kernel, l.initrd, l.guest, l.cgDir} {
		if f != nil {
			closeLogged(f, f.Name())
		}
	}
	if l.qemuFD >= 0 {
		if err := unix.Close(l.qemuFD); err != nil {
			warn("closing QEMU's descriptor", err)
		}
		l.qemuFD = -1
	}
	l.qemu, l.devNull, l.logW, l.kernel, l.initrd, l.guest, l.cgDir = nil, nil, nil, nil, nil, nil, nil
}

// closeHostEnds closes what the host keeps, when there is no VM to own it
// (and no QEMU runs any more).
func (l *launch) closeHostEnds() {
	for _, f := range []*os.File{l.logR, l.host} {
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
	l.logR, l.host, l.id, l.cg = nil, nil, nil, nil
}

func closeLogged(f *os.File, what string) {
	if err := f.Close(); err != nil {
		warn("closing "+what, err)
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
