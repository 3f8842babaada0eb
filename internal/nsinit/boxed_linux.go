package nsinit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A boxed init runs in a box a container runtime built (gVisor's runsc, a
// Docker container): namespaces, root, mounts, cgroups and the hostname
// are already in place, and the init has only the capabilities it keeps
// after lockdown (keptCaps) and CAP_SETPCAP to drop the rest; under gVisor
// also CAP_SYS_ADMIN, gVisor's own (nothing on the host), which hiding the
// agent needs and which every thread gives up once the user's agent has
// started (serveThroughUserAgent). It skips the steps that build the box
// and does every other one as the native init does, so the agent and what
// it forks are the same in every box.

// boxedControl puts the control connection at ControlFD before anything
// reads it. A runtime passes it one of two ways: as the init's stdin
// (runsc hands a host socket through as it is), or as the path of a unix
// socket bound into the box, which the host listens on for this one
// connection and removes once it has it (Docker).
func boxedControl(args []string) error {
	var fd int
	switch {
	case len(args) == 1 && (args[0] == BoxedStdin || args[0] == BoxedPod):
		if args[0] == BoxedPod {
			if err := enterPodMode(); err != nil {
				return err
			}
		}
		var err error
		if fd, err = unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, ControlFD); err != nil {
			return err
		}
	case len(args) == 2 && args[0] == BoxedConnect:
		c, err := net.Dial("unix", args[1])
		if err != nil {
			return err
		}
		// File dups the socket; both Go wrappers close their own.
		f, err := c.(*net.UnixConn).File()
		c.Close()
		if err != nil {
			return err
		}
		fd, err = unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, ControlFD)
		f.Close()
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("usage: %s %s | %s | %s PATH", BoxedPath, BoxedStdin, BoxedPod, BoxedConnect)
	}
	if err := moveFD(fd, ControlFD); err != nil {
		return err
	}
	return nullStdin()
}

// nullStdin points fd 0 at /dev/null: the init reads nothing there, and
// a stdin that was the control socket must not stay open twice.
func nullStdin() error {
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	return unix.Dup3(null, 0, 0)
}

// userUID and userGID are the ids the user's processes run as: the
// sandbox user's, or in a box whose uids are the host's (a container
// without a user namespace) the host ids the host leased for the box
// (Config.UID), so no two boxes and no real user share one.
var userUID, userGID = SandboxUID, SandboxGID

// nullOutput points fds 1 and 2 at /dev/null.
func nullOutput() error {
	null, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, 1, 0); err != nil {
		return err
	}
	return unix.Dup3(null, 2, 0)
}

// boxedSteps are setup's steps for a box a runtime built.
func boxedSteps() []setupStep {
	return []setupStep{
		{"choosing the user", func(c *Config) error {
			if c.UID > 0 {
				userUID, userGID = c.UID, c.GID
			}
			return nil
		}},
		{"receiving the egress link", receiveEgressLink},
		{"closing inherited descriptors", func(*Config) error { return closeInherited() }},
		{"opening the box's memory.events", openMemoryEvents},
		{"opening oom_score_adj", openOOMScore},
		{"setting file identity", setFileIdentity},
		{"tying the sandbox to the host", func(*Config) error { return dieWithHost() }},
		{"starting the egress bridge", startBridge},
		{"setting rlimits", setRlimits},
		{"limiting the CPUs in view", limitCPUs},
		{"hiding the agent", hideAgent},
	}
}

// receiveEgressLink takes the connection to the egress proxy the host
// sends after the Config, when the sandbox has the proxy: a boxed init
// cannot reach the proxy's socket by a path, so the host dials it and
// hands the connection over, and the bridge asks for more on it.
func receiveEgressLink(cfg *Config) error {
	if cfg.EgressPort == 0 || cfg.Stream {
		// Over the stream transport each connection is a channel.
		return nil
	}
	fds, err := receiveFDs(ControlFD)
	if err != nil {
		return err
	}
	if len(fds) != 1 {
		closeAll(fds)
		return fmt.Errorf("got %d descriptors, want 1", len(fds))
	}
	return moveFD(fds[0], EgressFD)
}

// moveFD makes fd number to (close-on-exec) and closes fd, if they differ.
func moveFD(fd, to int) error {
	if fd == to {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		return err
	}
	if err := unix.Dup3(fd, to, unix.O_CLOEXEC); err != nil {
		return err
	}
	return unix.Close(fd)
}

// closeInherited marks every descriptor from ControlFD on close-on-exec
// (the init's own already are), so none of the runtime's reaches the
// user's code. gVisor
// (2022) lacks CLOSE_RANGE_CLOEXEC, so where it is refused each open
// descriptor is marked by itself.
func closeInherited() error {
	err := unix.CloseRange(ControlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < ControlFD {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return err
		}
	}
	return nil
}

// isBoxed says this process was started as a boxed init, or became one
// without an exec (ServeBoxedStdin).
func isBoxed() bool { return boxedHere || len(os.Args) > 0 && os.Args[0] == BoxedPath }

// boxedHere is set once this process serves as the boxed agent without
// having been executed as one (ServeBoxedStdin).
var boxedHere bool
