package spawn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// UnshareWait bounds each wait of the host for warden-exec's next
// message in Unshare: warden-exec answers at once, so only one that is
// stuck meets it, and the run fails rather than hangs.
const UnshareWait = 10 * time.Second

// msgBytes is the size of warden-exec's handshake messages: a tag and two
// u32s (exec.h's MSG_BYTES).
const msgBytes = 12

// Unshare has the warden-exec that cmd started with i.Unshares (Command)
// make the sandbox's namespaces, talking on ctl, the host's end of its
// control socket: warden-exec unshares its user namespace, this writes
// its id maps (as os/exec would for a clone), warden-exec unshares
// i.Cloneflags' other namespaces, takes i.AmbientCaps as the clone would
// have given them, and forks PID 1 into the new PID namespace as this
// process's child (CLONE_PARENT), whose pid it sends before it exits.
// Unshare reaps that first process and returns PID 1, held by a pidfd,
// which the caller waits for from the thread that called cmd.Start: PID
// 1's parent-death signal is tied to it, and Unshare must run there too.
// On failure nothing it started is left: ctl is shut down, so a PID 1
// that was never reported reads EOF, and every child of this thread is
// killed and reaped.
func Unshare(cmd *exec.Cmd, i Init, ctl *os.File) (*PID1, error) {
	stage0, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		return nil, abandon(cmd, ctl, fmt.Errorf("opening a pidfd for warden-exec: %w", err))
	}
	defer unix.Close(stage0)
	pid, err := handshake(cmd.Process.Pid, stage0, i, ctl)
	if err == nil {
		err = stage0Ended(cmd, stage0)
	}
	var p *PID1
	if err == nil {
		// Only once the first process is reaped: its own pid is then
		// no child's.
		p, err = openChild(pid)
	}
	if err != nil {
		return nil, abandon(cmd, ctl, err)
	}
	return p, nil
}

// abandon ends a failed Unshare: it shuts ctl down, kills and reaps the
// first process and any child of this thread (killStrays), and returns
// err, with in the same line what of that failed.
func abandon(cmd *exec.Cmd, ctl *os.File, err error) error {
	var cleanup []string
	if herr := hangUp(ctl); herr != nil {
		cleanup = append(cleanup, herr.Error())
	}
	if cmd.ProcessState == nil {
		// A kill fails only once the process has ended: Wait says how.
		if kerr := cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			cleanup = append(cleanup, fmt.Sprintf("killing warden-exec: %v", kerr))
		}
		var exit *exec.ExitError
		if werr := cmd.Wait(); werr != nil && !errors.As(werr, &exit) {
			cleanup = append(cleanup, fmt.Sprintf("reaping warden-exec: %v", werr))
		}
	}
	if serr := killStrays(); serr != nil {
		cleanup = append(cleanup, serr.Error())
	}
	if len(cleanup) > 0 {
		return fmt.Errorf("%w (cleaning up: %s)", err, strings.Join(cleanup, "; "))
	}
	return err
}

// hangUp shuts the control socket down both ways: a PID 1 waiting for
// its plan reads EOF and ends.
func hangUp(ctl *os.File) error {
	rc, err := ctl.SyscallConn()
	if err != nil {
		return fmt.Errorf("shutting the control socket down: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_RDWR) }); err != nil {
		return fmt.Errorf("shutting the control socket down: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("shutting the control socket down: %w", serr)
	}
	return nil
}

// stage0Ended reaps warden-exec's first process, of the pidfd stage0,
// waiting for its end at most UnshareWait: nil if it exited 0, as it does
// once it has sent PID 1's pid.
func stage0Ended(cmd *exec.Cmd, stage0 int) error {
	h := &unshareConn{ctl: -1, pidfd: stage0, pid: cmd.Process.Pid}
	if err := h.wait(0); err != nil && !errors.Is(err, errStage0Ended) {
		return err
	}
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

// handshake is Unshare's conversation with warden-exec's first process,
// pid (of the pidfd stage0): PID 1's pid, as warden-exec reported it.
func handshake(pid, stage0 int, i Init, ctl *os.File) (int, error) {
	// Control lends the descriptor as it is, without depending on the
	// rules by which Fd may put a polled socket back in blocking mode.
	rc, err := ctl.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("talking to warden-exec: %w", err)
	}
	var pid1 int
	var herr error
	if err := rc.Control(func(fd uintptr) { pid1, herr = converse(&unshareConn{ctl: int(fd), pidfd: stage0, pid: pid}, i) }); err != nil {
		return 0, fmt.Errorf("talking to warden-exec: %w", err)
	}
	return pid1, herr
}

// converse is handshake's conversation over h's control socket,
// blocking or not (every read and write first polls it).
func converse(h *unshareConn, i Init) (int, error) {
	pid := h.pid
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
	if err == nil && (pid1 <= 1 || pid1 > 1<<22) {
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

// errStage0Ended is wait's error when warden-exec's first process ended
// before the socket was ready.
var errStage0Ended = errors.New("warden-exec ended while making the namespaces, before it answered")

// errClosedEarly is a handshake's end by warden-exec's close of its
// socket, seen by a read (EOF) or, first, by a write (EPIPE).
var errClosedEarly = errors.New("warden-exec closed its control socket while making the namespaces")

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
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
			return errClosedEarly
		}
		if err != nil {
			return fmt.Errorf("talking to warden-exec: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// expect reads warden-exec's next message (msgBytes), which must be tag, and
// returns its first number; a failure it reports is its errno, wrapped.
func (h *unshareConn) expect(tag string) (uint32, error) {
	var m [msgBytes]byte
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
			return errClosedEarly
		}
		b = b[n:]
	}
	return nil
}

// wait waits until the socket (none if ctl is -1) is ready for events
// (POLLIN or POLLOUT), the first process has ended first
// (errStage0Ended), or UnshareWait has passed (an error).
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
			return errStage0Ended
		}
	}
}
