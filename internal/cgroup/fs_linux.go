package cgroup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Small file-system helpers shared by the v1 and v2 code. Cgroup files are written with raw
// open/write/close: os.OpenFile registers every cgroup file with the runtime's poller (kernfs
// files are pollable), which adds four syscalls to each write and makes it about twice as slow.
// Files are opened without O_CREAT (a missing file must say ENOENT, not EACCES) and without
// O_TRUNC (kernfs ignores it, but it costs a setattr).

// mkdirCgroup creates one cgroup directory. It is a variable so that the fake-hierarchy tests
// can stand in for the kernel, which fills a new cgroup with its interface files.
var mkdirCgroup = func(path string) error {
	for {
		err := unix.Mkdir(path, 0o755)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "mkdir", Path: path, Err: err}
		}
		return nil
	}
}

// rmdirCgroup removes one cgroup directory and returns the bare errno. It is a variable for
// the same reason as mkdirCgroup: a fake cgroup directory has files in it.
var rmdirCgroup = unix.Rmdir

// openRaw opens a cgroup file with a raw open(2), retrying on EINTR.
func openRaw(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// writeFile writes a value to an existing cgroup file in one write(2), as the kernel wants.
// Errors are *os.PathErrors around the errno, so errors.Is works with fs.ErrPermission and
// fs.ErrNotExist.
func writeFile(path, value string) error {
	fd, err := openRaw(path, unix.O_WRONLY)
	if err != nil {
		return err
	}
	var n int
	for {
		n, err = unix.Write(fd, []byte(value))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	_ = unix.Close(fd) // closing a kernfs file cannot fail in a way that matters
	switch {
	case err != nil:
		return &os.PathError{Op: "write", Path: path, Err: err}
	case n != len(value):
		return &os.PathError{Op: "write", Path: path, Err: io.ErrShortWrite}
	}
	return nil
}

// readSmall reads a cgroup file of at most a few pages (cgroup.procs of a sandbox, a stats
// file) with raw syscalls.
func readSmall(path string) ([]byte, error) {
	fd, err := openRaw(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= 1<<22 {
				return nil, fmt.Errorf("reading %s: file too large", path)
			}
			buf = slices.Grow(buf, len(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readUint reads a one-number cgroup file.
func readUint(path string) (uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	v, err := parseSingle(strings.NewReader(string(b)))
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return v, nil
}

// readKeyed reads a flat-keyed cgroup file (cpu.stat, memory.events, memory.oom_control).
func readKeyed(path string) (map[string]uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	return parseKeyed(strings.NewReader(string(b)))
}

// readPids reads a cgroup.procs file.
func readPids(dir string) ([]int, error) {
	b, err := readSmall(dir + "/cgroup.procs")
	if err != nil {
		return nil, goneAsNotExist(err)
	}
	return parsePids(strings.NewReader(string(b)))
}

// goneAsNotExist reports a cgroup removed between the open of one of its
// files and the read (kernfs answers ENODEV then) as fs.ErrNotExist, as
// a cgroup removed before the open is: both have no processes left. A
// kill racing the removal of an ended process's cgroup failed on it.
func goneAsNotExist(err error) error {
	if errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%w: the cgroup was removed: %w", fs.ErrNotExist, err)
	}
	return err
}

// readControllers reads cgroup.controllers or cgroup.subtree_control.
func readControllers(path string) (map[string]bool, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	return parseControllers(strings.NewReader(string(b)))
}

// writeControl writes a controller's setting into a new cgroup and turns a failure into an
// error that names the limit, the controller and the file: a *ControllerError when the file
// is not writable or missing (the controller is not delegated or not enabled there), else a
// plain error (the kernel refused the value).
func writeControl(ctl, dir, file, value string) error {
	path := dir + "/" + file
	err := writeFile(path, value)
	switch {
	case err == nil:
		return nil
	case isPermission(err):
		return &ControllerError{Controller: ctl, Problem: "is not writable at " + path, Fix: fixDelegate, Err: unwrapPath(err)}
	case errors.Is(err, fs.ErrNotExist):
		return &ControllerError{Controller: ctl, Problem: "is not enabled in " + dir + " (it has no " + file + ")", Fix: fixDoctor, Err: unwrapPath(err)}
	}
	return fmt.Errorf("setting %s limit: writing %q to %s: %w", FlagName(ctl), value, path, unwrapPath(err))
}

// isPermission tells errors that mean "this user may not", as opposed to a kernel refusing a
// value: those make a controller unavailable rather than the request wrong.
func isPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)
}

// unwrapPath drops the *PathError around an errno when the message already names the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writable tells whether this process may create cgroups in dir (faccessat with the effective
// ids, as the kernel checks a mkdir).
func writable(dir string) bool {
	return unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS) == nil
}

// mkdirSandbox creates the sandbox's directory, which must not exist: an existing one is
// someone else's cgroup. Its parent <...>/warden is shared by all sandboxes and never removed,
// so it is created only when the kernel says it is missing: one syscall in the usual case.
func mkdirSandbox(dir string) error {
	err := mkdirCgroup(dir)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := mkdirCgroup(filepath.Dir(dir)); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return mkdirCgroup(dir)
}

// rmdirRetry removes a cgroup directory. Right after its last process was killed, the kernel
// may still list exiting tasks and answer EBUSY for a few milliseconds, so it retries with a
// growing pause for up to about a second. A directory that is already gone counts as removed.
func rmdirRetry(dir string) error {
	delay := 500 * time.Microsecond
	deadline := time.Now().Add(time.Second)
	for {
		err := rmdirCgroup(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			if pids, perr := readPids(dir); perr == nil && len(pids) > 0 {
				return fmt.Errorf("removing cgroup %s: %w (processes %v still in it)", dir, err, pids)
			}
			return fmt.Errorf("removing cgroup %s: %w", dir, err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// removeStaleDir removes a leftover cgroup and any child cgroups in it, deepest first, unless
// something in it still has processes.
func removeStaleDir(dir string) error {
	if pids, err := readPids(dir); err != nil || len(pids) > 0 {
		return nil // gone already, unreadable, or not stale after all
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeStaleDir(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	err = rmdirCgroup(dir)
	for errors.Is(err, unix.EINTR) {
		err = rmdirCgroup(dir)
	}
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EBUSY) {
		return nil
	}
	return fmt.Errorf("removing stale cgroup %s: %w", dir, err)
}

// killRounds bounds killAll: each round can only find children forked before their parent was
// killed, so real process trees end in a few rounds.
const killRounds = 1000

// killAll sends SIGKILL to every process that list returns, listing again until a listing
// shows no process it has not already killed. A killed process cannot fork any more, so each
// round can only find children forked before their parent died; the rounds are bounded
// anyway. Exited processes may stay listed for a moment; that is why already-killed pids
// do not count.
func killAll(list func() ([]int, error)) error {
	killed := make(map[int]bool)
	for range killRounds {
		pids, err := list()
		if err != nil {
			return err
		}
		fresh := 0
		for _, pid := range pids {
			if killed[pid] {
				continue
			}
			fresh++
			killed[pid] = true
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("killing process %d: %w", pid, err)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return fmt.Errorf("processes kept appearing after %d rounds of kills", killRounds)
}

// treePids lists the processes in dir and in any child cgroups. A cgroup
// removed meanwhile holds none; any other failure to list the children
// (descriptors running out, say) is an error, as a kill that skipped them
// would leave their processes running.
func treePids(dir string) ([]int, error) {
	pids, err := readPids(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if err = goneAsNotExist(err); errors.Is(err, fs.ErrNotExist) {
			return pids, nil
		}
		return nil, fmt.Errorf("listing the child cgroups of %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			sub, err := treePids(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			pids = append(pids, sub...)
		}
	}
	return pids, nil
}

// waitFor polls cond every millisecond until it holds or timeout passes, and reports which.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// itoa formats a limit or pid for a cgroup file.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }
