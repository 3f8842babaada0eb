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

// bootSched is the agent's niceness and CPU affinity at boot, which
// restoreSched puts back before each fork when the kernel lets the user
// change them (Config.HideAgent).
var bootSched struct {
	nice int
	cpus unix.CPUSet
}

// hideAgent puts the agent out of the user's reach where the box's kernel
// does not (Config.HideAgent), as far as it can from inside: an empty,
// read-only directory no one may open over /proc/1, so the user reads
// nothing there, no extra devices, and the scheduling the agent's forks
// inherit recorded, to be restored before each. The agent's other
// threads stay readable as /proc/<tid> (docs/architecture.md lists what
// they show); only a PID namespace of the user's own would hide them. It
// runs after every
// step that reads /proc/self, which is /proc/1 to the agent, and needs
// CAP_SYS_ADMIN in the box, which it then takes from every thread.
func hideAgent(cfg *Config) error {
	if !cfg.HideAgent {
		return nil
	}
	// Files are the agent's to change here, not the user's, as whom
	// setFileIdentity made the thread act on files.
	if err := asRoot(hideFiles); err != nil {
		return err
	}
	// Every thread of the agent drops CAP_SYS_ADMIN now; lockdown keeps
	// CAP_SETPCAP to empty the bounding set of the thread that forks.
	if err := capsetAllThreads(append([]uintptr{unix.CAP_SETPCAP}, keptCaps...)); err != nil {
		return err
	}
	return recordSched()
}

// asRoot runs fn with this thread's file identity root's, then the user's
// again.
func asRoot(fn func() error) error {
	_ = unix.Setfsuid(0)
	_ = unix.Setfsgid(0)
	defer func() {
		_ = unix.Setfsgid(userGID)
		_ = unix.Setfsuid(userUID)
	}()
	return fn()
}

// hideFiles mounts over /proc/1 and takes the extra devices away.
func hideFiles() error {
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("none", "/proc/1", "tmpfs", flags, "mode=0"); err != nil {
		return fmt.Errorf("mounting over /proc/1: %w", err)
	}
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

// recordSched keeps the agent's niceness and CPU affinity for
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

// hidden says hideAgent ran, so restoreSched has values to restore.
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
