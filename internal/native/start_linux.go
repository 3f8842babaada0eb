package native

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
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

// initProc is a started init; exited delivers its state once reaped.
type initProc struct {
	proc   *os.Process
	exited chan *os.ProcessState
}

// kill goes through os.Process, which uses a pidfd: after the init has
// been reaped its pid may belong to someone else.
func (p *initProc) kill() { _ = p.proc.Kill() }

// startInit clones the init into new namespaces. The clone and the wait
// happen on one locked OS thread that lives as long as the init, because
// the kernel ties a child's parent-death signal to the creating thread
// (golang/go#27505): a thread exiting early would kill the sandbox.
func startInit(b *box) (*initProc, error) {
	cmd := &exec.Cmd{
		Path:       nsinit.Binary(),
		Args:       []string{nsinit.Arg0},
		Env:        []string{"GOMAXPROCS=1"},
		Stdin:      b.child.stdin,
		Stdout:     b.child.stdout,
		Stderr:     b.child.stderr,
		ExtraFiles: b.child.extra(),
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 namespaces,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: nsinit.SandboxUID, HostID: b.ids.uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: nsinit.SandboxGID, HostID: b.ids.gid, Size: 1}},
			GidMappingsEnableSetgroups: !b.ids.rootless,
			AmbientCaps:                initCaps,
		},
	}
	if b.child.cgroupDir != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(b.child.cgroupDir.Fd())
	}
	started := make(chan error, 1)
	p := &initProc{exited: make(chan *os.ProcessState, 1)}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.proc = cmd.Process
		started <- nil
		_ = cmd.Wait()
		p.exited <- cmd.ProcessState
	}()
	if err := <-started; err != nil {
		return nil, startError(err)
	}
	return p, nil
}
