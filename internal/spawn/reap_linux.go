package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// WithPidfd has cmd's Start give the caller a pidfd of the process (the
// standard library keeps a duplicate of its own), for Reap; call it
// before Start. The int is -1 until Start has set it.
func WithPidfd(cmd *exec.Cmd) *int {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	pidfd := -1
	cmd.SysProcAttr.PidFD = &pidfd
	return &pidfd
}

// Reap waits for cmd's started process to end, reaps it and says how it
// ended; it closes pidfd (WithPidfd's, -1 for none). The wait is parked
// on Go's network poller, where a pidfd turns readable once its process
// has exited, rather than in a blocking waitid: a thread blocked in a
// system call has its P taken by the runtime's monitor after 20 µs and
// handed to another thread, which is woken, or created, to find nothing
// to do, host work no sandbox is charged for. cmd.Wait then only
// collects what is already there. Without a pidfd, or one the poller
// refuses, cmd.Wait waits as before; that reason is returned beside the
// Exit for the caller to log.
func Reap(cmd *exec.Cmd, pidfd int) (*Exit, error) {
	var pollErr error
	if pidfd >= 0 {
		pollErr = awaitExit(pidfd)
	}
	// How the process ended is read from ProcessState, not Wait's error.
	_ = cmd.Wait()
	return ExitOf(cmd.ProcessState), pollErr
}

// awaitExit returns once the process of pidfd has exited, waiting in the
// poller; it closes pidfd. An error says the pidfd could not be polled
// (the process may still run) or could not be closed.
func awaitExit(pidfd int) (err error) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		// The close of a pidfd that was never used has nothing to say.
		_ = unix.Close(pidfd)
		return fmt.Errorf("making the pidfd non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the pidfd: %w", cerr))
		}
	}()
	return pollExited(f)
}

// pollExited returns once the process of the pidfd f (non-blocking) has
// exited, waiting in the poller. An error says f could not be polled
// (the process may still run).
func pollExited(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("polling the pidfd: %w", err)
	}
	var perr error
	if err := rc.Read(func(fd uintptr) bool {
		var done bool
		done, perr = exited(int(fd))
		return done || perr != nil
	}); err != nil {
		return fmt.Errorf("polling the pidfd: %w", err)
	}
	return perr
}

// exited says, without waiting, whether the process of pidfd has exited
// (its pidfd is readable), asking waitid with WNOWAIT, which leaves it
// to be reaped. Not poll(2): poll fails with EINVAL while this process
// may open no descriptor at all (a soft RLIMIT_NOFILE of 0), and every
// reap would then fall back to a blocking wait and log why. Any error,
// EINTR too, sends the caller to a blocking wait, which is always right.
func exited(pidfd int) (bool, error) {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return false, fmt.Errorf("asking whether the pidfd's process exited: %w", err)
	}
	// With WNOHANG and nothing to report, the kernel clears info.
	return info.Signo != 0, nil
}
