package native

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spawn"
)

// namespaces are created together when the init is cloned. The cgroup
// namespace is entered later by the init itself, once the host has placed
// it in its cgroup, so its root is the sandbox's own cgroup.
const namespaces = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// initCaps survive the init's exec as ambient capabilities. Its uid is not
// root inside the user namespace (only the sandbox user is mapped), so
// without them the exec would leave it powerless to mount or set ids.
var initCaps = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID,
	unix.CAP_SETPCAP, unix.CAP_KILL,
}

// initProc is a started init; exited delivers how it ended once reaped
// (nil if that is unknown: its spawner died).
type initProc struct {
	pid int
	// signal goes through a pidfd: after the init has been reaped its pid
	// may belong to someone else.
	signal func(syscall.Signal) error
	exited chan *spawn.Exit
}

// kill kills the init; it fails only once the init has been reaped, when
// there is nothing left to kill.
func (p *initProc) kill() { _ = p.signal(syscall.SIGKILL) }

// spawner, when set (UseSpawner), starts sessions' inits, one-shot runs'
// inits or warden-exec, and mapping namespaces instead of this process.
var spawner *spawn.Client

// UseSpawner makes this process start sandbox inits (and the user
// namespaces of idmapped workspaces) from a small helper process rather
// than by forking itself (see package spawn). A long-lived server with
// many sandboxes calls it once at start; warden run, which starts one
// sandbox, has no use for it.
func UseSpawner() { spawner = &spawn.Client{} }

func (b *box) initSpec() spawn.Init {
	return spawn.Init{
		UID: b.ids.uid, GID: b.ids.gid, Setgroups: !b.ids.rootless,
		Cloneflags: namespaces, AmbientCaps: initCaps, Exec: b.fast != nil,
	}
}

// directSpec is initSpec for startDirect: warden-exec makes its
// namespaces itself (spawn.Unshare), so this process, a Go runtime with
// the whole CLI mapped, vforks it instead of copying its page tables.
func (b *box) directSpec() spawn.Init {
	i := b.initSpec()
	i.Unshares = i.Exec
	return i
}

// startInit clones the init into new namespaces: through the spawner when
// there is one, else from this process.
func startInit(b *box) (*initProc, error) {
	if spawner != nil {
		return startSpawned(b)
	}
	return startDirect(b)
}

// startDirect forks the init (or warden-exec) from this process. The clone and the wait
// happen on one locked OS thread that lives as long as the init, because
// the kernel ties a child's parent-death signal to the creating thread
// (golang/go#27505): a thread exiting early would kill the sandbox. The
// thread waits parked, not in a system call (spawn.Reap).
func startDirect(b *box) (*initProc, error) {
	i := b.directSpec()
	cmd, err := spawn.Command(i, [3]*os.File{b.child.stdin, b.child.stdout, b.child.stderr}, b.child.extra(), b.child.cgroupDir)
	if err != nil {
		return nil, startError(err)
	}
	// warden-exec's first process is reaped by spawn.Unshare, PID 1 by a
	// pidfd of its own: only a cloned init needs cmd's.
	var pidfd *int
	if !i.Unshares {
		pidfd = spawn.WithPidfd(cmd)
	}
	started := make(chan error, 1)
	p := &initProc{exited: make(chan *spawn.Exit, 1)}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := spawn.StartError(i, cmd.Start()); err != nil {
			started <- err
			return
		}
		if i.Unshares {
			e, err := startUnshared(p, cmd, i, b.ctlHost, started)
			if err != nil {
				b.log().Warn("waiting for the sandbox's PID 1 in a blocking wait", "err", err)
			}
			p.exited <- e
			return
		}
		p.pid, p.signal = cmd.Process.Pid, func(s syscall.Signal) error { return cmd.Process.Signal(s) }
		started <- nil
		e, err := spawn.Reap(cmd, *pidfd)
		if err != nil {
			b.log().Warn("waiting for the sandbox init in a blocking wait", "err", err)
		}
		p.exited <- e
	}()
	if err := <-started; err != nil {
		return nil, startError(err)
	}
	return p, nil
}

// startUnshared has the warden-exec cmd started make its namespaces and
// PID 1 (spawn.Unshare), reports on started, and returns how PID 1
// ended (nil if it never started), waited for in the poller
// (spawn.PID1.Reap; an error says the wait blocked instead, and why).
// It runs on the thread that started cmd, which PID 1's parent-death
// signal is tied to.
func startUnshared(p *initProc, cmd *exec.Cmd, i spawn.Init, ctl *os.File, started chan<- error) (*spawn.Exit, error) {
	pid1, err := spawn.Unshare(cmd, i, ctl)
	if err != nil {
		started <- err
		return nil, nil
	}
	p.pid, p.signal = pid1.Pid, func(s syscall.Signal) error { return pid1.Signal(s) }
	started <- nil
	return pid1.Reap()
}

// startSpawned has the spawner start the init (or warden-exec, which the
// spawner finds beside itself as this process does).
func startSpawned(b *box) (*initProc, error) {
	proc, err := spawner.Start(b.initSpec(), [3]*os.File{b.child.stdin, b.child.stdout, b.child.stderr}, b.child.extra(), b.child.cgroupDir)
	if err != nil {
		return nil, startError(err)
	}
	p := &initProc{pid: proc.Pid, signal: proc.Signal, exited: make(chan *spawn.Exit, 1)}
	go func() {
		e := proc.Exit()
		proc.Release()
		p.exited <- e
	}()
	return p, nil
}
