package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// extraDevices are what gVisor's /dev holds beyond the native box's
// (null, zero, full, random, urandom): the user needs none of them, and
// each is kernel surface (FUSE, a TUN device, pseudo-terminals, whose
// devpts at /dev/pts is unmounted first).
var extraDevices = []string{"/dev/fuse", "/dev/net/tun", "/dev/net", "/dev/ptmx", "/dev/tty", "/dev/pts"}

// ptsDir is the devpts mount hideAgent takes away with the devices.
const ptsDir = "/dev/pts"

// bootSched is the user's agent's niceness and CPU affinity at its start,
// which restoreSched puts back before each fork: the kernel lets the user
// change them (Config.HideAgent), and every process forked would inherit
// them.
var bootSched struct {
	nice int
	cpus unix.CPUSet
}

// hideAgent puts the agent out of the user's reach where the box's kernel
// does not (Config.HideAgent), as far as setup goes: no extra devices. The
// session is then served by the user's agent, from a PID namespace of the
// user's own (serveThroughUserAgent), where no task of this process has
// an id; it needs CAP_SYS_ADMIN, which lockdownAllThreads takes away once
// the user's agent has started.
func hideAgent(cfg *Config) error {
	if !cfg.HideAgent {
		return nil
	}
	// Files are the agent's to change here, not the user's, as whom
	// setFileIdentity made the thread act on files.
	return asRoot(removeDevices)
}

// asRoot runs fn with this thread's file identity root's, then the user's
// again.
func asRoot(fn func() error) error {
	// setfsuid(2) and setfsgid(2) report no errors: they return the previous id
	_ = unix.Setfsuid(0)
	_ = unix.Setfsgid(0) // reports no error either
	defer func() {
		// setfsgid(2) and setfsuid(2) report no errors
		_ = unix.Setfsgid(userGID)
		_ = unix.Setfsuid(userUID) // reports no error either
	}()
	return fn()
}

// removeDevices takes the extra devices away, and the devpts at ptsDir.
func removeDevices() error {
	if err := unix.Unmount(ptsDir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", ptsDir, err)
	}
	for _, d := range extraDevices {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	return nil
}

// recordSched keeps the user's agent's niceness and CPU affinity for
// restoreSched.
func recordSched() error {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return fmt.Errorf("reading the agent's niceness: %w", err)
	}
	// The raw syscall answers 20 - nice, so that it is never negative.
	bootSched.nice = 20 - prio
	if err := unix.SchedGetaffinity(0, &bootSched.cpus); err != nil {
		return fmt.Errorf("reading the agent's CPU affinity: %w", err)
	}
	hidden = true
	return nil
}

// hidden says recordSched ran, so restoreSched has values to restore.
var hidden bool

// restoreSched gives this thread back its boot niceness and CPU affinity
// before a fork, undoing whatever the user set on the agent through a
// kernel that does not refuse it before the restore; a user's process
// running concurrently can still change them between the restore and the
// fork, so the next process may start with the user's own choice.
func restoreSched() error {
	if !hidden {
		return nil
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, bootSched.nice); err != nil {
		return fmt.Errorf("restoring the agent's niceness: %w", err)
	}
	if err := unix.SchedSetaffinity(0, &bootSched.cpus); err != nil {
		return fmt.Errorf("restoring the agent's CPU affinity: %w", err)
	}
	return nil
}
