package spawn

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// PID1 is warden-exec's PID 1 as Unshare found it: a child of this
// process that os/exec did not start, held by a pidfd, so neither a
// signal nor the wait can reach another process, whatever pid
// warden-exec reported.
type PID1 struct {
	// Pid is PID 1's pid in this process's PID namespace.
	Pid int
	// f is the pidfd, non-blocking (polled); Reap closes it once PID 1
	// is reaped.
	f *os.File
}

// openChild holds pid by a pidfd, which it refuses unless pid is an
// unreaped child of this process: a pid read from warden-exec is not
// trusted, and only a child's pid cannot be reused before it is reaped.
func openChild(pid int) (*PID1, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("opening a pidfd for warden-exec's PID 1 (pid %d): %w", pid, err)
	}
	err = unix.Waitid(unix.P_PIDFD, fd, nil, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, unix.EINTR) {
		err = unix.Waitid(unix.P_PIDFD, fd, nil, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	}
	if err != nil {
		// Closing a pidfd that was only asked about has nothing to say.
		_ = unix.Close(fd)
		if errors.Is(err, unix.ECHILD) {
			return nil, fmt.Errorf("warden-exec reported PID 1 as pid %d, which is not this process's child: refusing it", pid)
		}
		return nil, fmt.Errorf("checking warden-exec's PID 1 (pid %d): %w", pid, err)
	}
	return &PID1{Pid: pid, f: os.NewFile(uintptr(fd), "pidfd")}, nil
}

// Signal sends sig to PID 1 through its pidfd; once PID 1 is reaped it
// reports os.ErrProcessDone.
func (p *PID1) Signal(sig syscall.Signal) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return os.ErrProcessDone
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return os.ErrProcessDone
	}
	return serr
}

// Reap waits for PID 1's end in the poller (see Reap), reaps it, closes
// its pidfd and says how it ended. An error says the pidfd could not be
// polled and the wait blocked instead, for the caller to log.
func (p *PID1) Reap() (*Exit, error) {
	pollErr := pollExited(p.f)
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	var err error
	for {
		if _, err = syscall.Wait4(p.Pid, &ws, 0, &ru); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	// Only after the reap: until then the pidfd holds the pid.
	if cerr := p.f.Close(); cerr != nil && pollErr == nil {
		pollErr = fmt.Errorf("closing PID 1's pidfd: %w", cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("reaping PID 1 (pid %d): %w", p.Pid, err)
	}
	return &Exit{Status: ws, Rusage: ru}, pollErr
}

// kill kills and reaps PID 1, whose start failed after its fork.
func (p *PID1) kill() error {
	if err := p.Signal(unix.SIGKILL); err != nil {
		return fmt.Errorf("killing PID 1 (pid %d): %w", p.Pid, err)
	}
	if _, err := p.Reap(); err != nil {
		return err
	}
	return nil
}

// killStrays kills and reaps every child of the calling thread: after a
// failed handshake, a PID 1 that warden-exec forked but never reported.
// The thread is the locked one that started warden-exec, whose children
// (PID 1 is made with CLONE_PARENT) are that run's alone; warden-exec's
// first process is reaped by then.
func killStrays() error {
	b, err := os.ReadFile("/proc/thread-self/children")
	if err != nil {
		return fmt.Errorf("listing this thread's children: %w", err)
	}
	var errs []string
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err == nil {
			var p *PID1
			if p, err = openChild(pid); err == nil {
				err = p.kill()
			}
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ending an unreported PID 1: %s", strings.Join(errs, "; "))
	}
	return nil
}
