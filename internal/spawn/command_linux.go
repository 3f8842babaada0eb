package spawn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// Command is the command that starts a sandbox init as i says, with
// stdio, the descriptors from fd 3 on (a nil one leaves its number
// closed) and, when not nil, the cgroup directory to clone it into. The
// spawner and warden run (which forks its one init itself) both start
// inits this way, so warden-exec gets the same descriptors from either.
// The init is tied to its parent thread's life from the clone on
// (Pdeathsig), so a box whose starter dies before the init's own
// DieWithHost op (which re-arms the same signal) dies too. With
// i.Unshares it is cloned into no namespace, with no id map or
// capability: Unshare then makes them with it. It fails only when i
// asks for warden-exec and there is no trusted one.
func Command(i Init, stdio [3]*os.File, extra []*os.File, cgroupDir *os.File) (*exec.Cmd, error) {
	path, arg0 := nsinit.Binary(), nsinit.Arg0
	if i.Exec {
		// The child's copies of its files may not land on the
		// descriptor p names.
		p, err := nsinit.ExecutorBinaryAbove(childReach(stdio, extra))
		if err != nil {
			return nil, err
		}
		path, arg0 = p, nsinit.ExecName
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        []string{arg0},
		Env:         []string{"GOMAXPROCS=1"},
		Stdin:       stdio[0],
		Stdout:      stdio[1],
		Stderr:      stdio[2],
		ExtraFiles:  extra,
		SysProcAttr: i.sysProcAttr(cgroupDir),
	}
	return cmd, nil
}

// childReach is nsinit.ChildReach for stdio and extra.
func childReach(stdio [3]*os.File, extra []*os.File) int {
	return nsinit.ChildReach(append(stdio[:], extra...))
}

// sysProcAttr is how Command clones the init: into i's namespaces with
// its id maps and ambient capabilities, or, for a warden-exec that makes
// them itself (Unshares), into none, which os/exec then starts with
// CLONE_VFORK|CLONE_VM; into cgroupDir when not nil.
func (i Init) sysProcAttr(cgroupDir *os.File) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if !i.Exec || !i.Unshares {
		uids, gids := i.idMaps()
		a.Cloneflags, a.UidMappings, a.GidMappings = i.Cloneflags, uids, gids
		a.GidMappingsEnableSetgroups, a.AmbientCaps = i.Setgroups, i.AmbientCaps
	}
	if cgroupDir != nil {
		a.UseCgroupFD = true
		a.CgroupFD = int(cgroupDir.Fd())
	}
	return a
}

// idMaps are the sandbox's uid and gid maps: its one user as i's host ids.
func (i Init) idMaps() (uids, gids []syscall.SysProcIDMap) {
	return []syscall.SysProcIDMap{{ContainerID: nsinit.SandboxUID, HostID: i.UID, Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: nsinit.SandboxGID, HostID: i.GID, Size: 1}}
}

// ExitOf is how a reaped process ended.
func ExitOf(ps *os.ProcessState) *Exit {
	e := &Exit{}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		e.Status = ws
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		e.Rusage = *ru
	}
	return e
}

// UserNamespace returns a user namespace whose only mapping is insideUID
// and insideGID to hostUID and hostGID, the shape an idmapped mount needs.
// The kernel creates user namespaces only with a process, so one is
// started (the init binary, parked on a pipe that never delivers) and
// killed as soon as its namespace is open.
func UserNamespace(insideUID, hostUID, insideGID, hostGID int) (*os.File, error) {
	// The parked process's parent-death signal is tied to this thread;
	// keep it until the process is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer w.Close()
	cmd := &exec.Cmd{
		Path:       nsinit.Binary(),
		Args:       []string{nsinit.Arg0},
		Env:        []string{"GOMAXPROCS=1"},
		ExtraFiles: []*os.File{r},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: insideUID, HostID: hostUID, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: insideGID, HostID: hostGID, Size: 1}},
			Pdeathsig:   unix.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		// It only holds a namespace open: a kill fails only once it has
		// ended, and Wait's status says nothing anyone needs.
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // only reaps it
	}()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, errors.Join(errors.New("opening the mapping namespace"), err)
	}
	return ns, nil
}

// StartError is cmd.Start's error for a Command of i: a warden-exec that
// Executor accepted but that the kernel will not execute (ENOENT,
// ENOEXEC, EACCES, ETXTBSY: its descriptor gone, of another machine, on a
// noexec mount, being written) is reported as nsinit.ErrNoExecutor too,
// so auto takes the Go init rather than failing every run.
func StartError(i Init, err error) error {
	if err != nil && i.Exec && unexecutable(err) {
		return fmt.Errorf("%w: %w", nsinit.ErrNoExecutor, err)
	}
	return err
}

// unexecutable says whether err is an exec's refusal of the file itself.
func unexecutable(err error) bool {
	for _, e := range []error{fs.ErrNotExist, unix.ENOEXEC, unix.EACCES, unix.ETXTBSY} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
