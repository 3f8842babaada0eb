package spawn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// UnshareWait bounds each wait of the host for warden-exec's next
// message in Unshare: warden-exec answers at once, so only one that is
// stuck meets it, and the run fails rather than hangs.
const UnshareWait = 10 * time.Second

// Unshare has the warden-exec that cmd started with i.Unshares (Command)
// make the sandbox's namespaces, talking on ctl, the host's end of its
// control socket: warden-exec unshares its user namespace, this writes
// its id maps (as os/exec would for a clone), warden-exec unshares
// i.Cloneflags' other namespaces, takes i.AmbientCaps as the clone would
// have given them, and forks PID 1 into the new PID namespace as this
// process's child (CLONE_PARENT), whose pid it sends before it exits.
// Unshare reaps that first process and returns PID 1, which the caller
// waits for from the thread that called cmd.Start: PID 1's parent-death
// signal is tied to it. On failure nothing it started is left.
func Unshare(cmd *exec.Cmd, i Init, ctl *os.File) (*os.Process, error) {
	pid, err := handshake(cmd.Process.Pid, i, ctl)
	if err != nil {
		// err says why: a kill fails only once it has ended, and Wait
		// only reaps it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	if err := stage0Ended(cmd); err != nil {
		killPID1(pid)
		return nil, err
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		killPID1(pid)
		return nil, fmt.Errorf("finding warden-exec's PID 1: %w", err)
	}
	return p, nil
}

// stage0Ended reaps warden-exec's first process: nil if it exited 0, as
// it does once it has sent PID 1's pid.
func stage0Ended(cmd *exec.Cmd) error {
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("warden-exec ended while making the namespaces: %s", exit.ProcessState)
	}
	if err != nil {
		return fmt.Errorf("waiting for warden-exec's first process: %w", err)
	}
	return nil
}

// killPID1 kills and reaps PID 1, this process's child, when its start
// failed after its fork.
func killPID1(pid int) {
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		return // not there to reap
	}
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// handshake is Unshare's conversation with warden-exec's first process,
// pid: PID 1's pid, which is this process's child.
func handshake(pid int, i Init, ctl *os.File) (int, error) {
	// ctl.Fd would put a polled (non-blocking) socket back in blocking
	// mode for good, and the caller's later waits on it would then block
	// a thread; Control lends the descriptor as it is.
	rc, err := ctl.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("talking to warden-exec: %w", err)
	}
	var pid1 int
	var herr error
	if err := rc.Control(func(fd uintptr) { pid1, herr = converse(pid, int(fd), i) }); err != nil {
		return 0, fmt.Errorf("talking to warden-exec: %w", err)
	}
	return pid1, herr
}

// converse is handshake's conversation over the control socket ctl,
// blocking or not (every read and write first polls it).
func converse(pid, ctl int, i Init) (int, error) {
	h := &unshareConn{ctl: ctl, pid: pid}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		h.pidfd = fd
		defer unix.Close(fd)
	} else {
		h.pidfd = -1 // a kernel before 5.3: the bound alone ends a wait
	}
	hello := binary.LittleEndian.AppendUint32([]byte(plan.HelloTag), plan.Version)
	if err := h.send(hello); err != nil {
		return 0, err
	}
	if _, err := h.expect(plan.UsernsTag); err != nil {
		return 0, err
	}
	if err := writeIDMaps(pid, i); err != nil {
		return 0, err
	}
	mapped := binary.LittleEndian.AppendUint64([]byte(plan.MappedTag), uint64(i.Cloneflags&^unix.CLONE_NEWUSER))
	if err := h.send(binary.LittleEndian.AppendUint64(mapped, capMask(i.AmbientCaps))); err != nil {
		return 0, err
	}
	pid1, err := h.expect(plan.PidTag)
	if err == nil && (pid1 == 0 || pid1 > 1<<22) {
		err = fmt.Errorf("warden-exec reported PID 1 as pid %d, which no process has", pid1)
	}
	return int(pid1), err
}

// capMask is caps as a capability bit mask.
func capMask(caps []uintptr) uint64 {
	var m uint64
	for _, c := range caps {
		m |= 1 << c
	}
	return m
}

// writeIDMaps writes the maps Command gives a clone into a new user
// namespace, in os/exec's order: uid_map, setgroups (a kernel without it
// is fine), gid_map.
func writeIDMaps(pid int, i Init) error {
	uids, gids := i.idMaps()
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	setgroups := "deny"
	if i.Setgroups {
		setgroups = "allow"
	}
	if err := writeProc(dir+"uid_map", formatMap(uids)); err != nil {
		return err
	}
	if err := writeProc(dir+"setgroups", setgroups); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return writeProc(dir+"gid_map", formatMap(gids))
}

// formatMap is m as an id map file takes it, one line per range.
func formatMap(m []syscall.SysProcIDMap) string {
	var s string
	for _, r := range m {
		s += fmt.Sprintf("%d %d %d\n", r.ContainerID, r.HostID, r.Size)
	}
	return s
}

// writeProc writes s to the proc file p in one write, as id maps need.
func writeProc(p, s string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("writing the sandbox's id maps: %w", err)
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the sandbox's id maps: %s: %w", p, err)
	}
	return nil
}

// unshareConn is the host's end of Unshare's conversation: the control
// socket, and warden-exec's first process (a pidfd, or -1) whose end
// ends a wait.
type unshareConn struct {
	ctl, pidfd, pid int
}

// send writes b whole.
func (h *unshareConn) send(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(h.ctl, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			if err := h.wait(unix.POLLOUT); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("talking to warden-exec: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// expect reads warden-exec's next 12-byte message, which must be tag, and
// returns its first number; a failure it reports is its errno, wrapped.
func (h *unshareConn) expect(tag string) (uint32, error) {
	var m [12]byte
	if err := h.read(m[:]); err != nil {
		return 0, err
	}
	a, b := binary.LittleEndian.Uint32(m[4:]), binary.LittleEndian.Uint32(m[8:])
	switch string(m[:4]) {
	case tag:
		return a, nil
	case plan.FailedTag:
		step, ok := plan.UnshareSteps[a]
		if !ok {
			step = fmt.Sprintf("step %d", a)
		}
		return 0, fmt.Errorf("warden-exec: %s: %w", step, syscall.Errno(b))
	}
	return 0, fmt.Errorf("warden-exec answered %q where this warden expected %q: it is from another build; reinstall it from the same build as warden (make build)", m[:4], tag)
}

// read fills b from the socket, each wait bounded by UnshareWait and
// ended by the first process's end.
func (h *unshareConn) read(b []byte) error {
	for len(b) > 0 {
		if err := h.wait(unix.POLLIN); err != nil {
			return err
		}
		n, err := unix.Read(h.ctl, b)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil && !errors.Is(err, unix.ECONNRESET) {
			return fmt.Errorf("reading warden-exec's answer: %w", err)
		}
		// ECONNRESET: it closed its end with the host's hello unread.
		if n <= 0 {
			return errors.New("warden-exec closed its control socket while making the namespaces")
		}
		b = b[n:]
	}
	return nil
}

// wait waits until the socket is ready for events (POLLIN or POLLOUT),
// the first process has ended first (an error), or UnshareWait has passed
// (an error).
func (h *unshareConn) wait(events int16) error {
	fds := []unix.PollFd{{Fd: int32(h.ctl), Events: events}, {Fd: int32(h.pidfd), Events: unix.POLLIN}}
	if h.pidfd < 0 {
		fds = fds[:1]
	}
	deadline := time.Now().Add(UnshareWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("warden-exec (pid %d) did not answer within %s while making the namespaces", h.pid, UnshareWait)
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		switch {
		case errors.Is(err, unix.EINTR) || n == 0:
			continue
		case err != nil:
			return fmt.Errorf("waiting for warden-exec: %w", err)
		case fds[0].Revents != 0:
			return nil
		default:
			return errors.New("warden-exec ended while making the namespaces, before it answered")
		}
	}
}
