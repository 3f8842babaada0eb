package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/egress"
)

// The user's agent (Config.HideAgent). A box whose kernel shows every
// task's /proc files to every user (gVisor's) would show the uid-0
// agent's threads to the user's code: they have ids in its PID namespace.
// So the agent serves the session from a PID namespace of the user's own:
// it starts its own binary again there (boxedUserAgent), as PID 1 of that
// namespace, hands it the control connection and waits for it. The user's
// agent mounts its namespace's /proc over the box's, covers its own entry,
// becomes the sandbox user (no capability, non-dumpable) and serves the
// session as the agent does; every process it forks is the user's, in the
// user's namespace, where no task of the uid-0 agent has an id. gVisor
// refuses unshare(CLONE_NEWPID) to a threaded process and setns(2) of a
// PID namespace, so the namespace's own first process has to be the one
// that forks.

// boxedUserAgent, as a boxed init's first argument, makes it the user's
// agent; the sandbox user's uid and gid follow.
const boxedUserAgent = "user-agent"

// userAgentTasks is the allowance RLIMIT_NPROC gets for the user's
// agent's threads, which run as the sandbox user and so count against
// it: a third more than Go's runtime started for it, measured on gVisor
// over the stream with the egress proxy (TestUserAgentThreadsEgress): 6
// or 7 idle, 8 or 9 with its bridge holding 64 relays while an
// interpreter and an exec run. Fewer, and a user who filled
// RLIMIT_NPROC first would make its next thread fail, and the session
// with it. The box's pids cgroup, which has head-room for gVisor, still
// bounds the whole box.
const userAgentTasks = 12

// processLimit is the sandbox's RLIMIT_NPROC, with room for the user's
// agent where there is one.
func processLimit(cfg *Config) uint64 {
	n := cfg.Rlimits.Processes
	if n > 0 && cfg.HideAgent {
		n += userAgentTasks
	}
	return n
}

// userAgentStream and userAgentFD, the user's agent's last argument, say
// whether it serves the session over the stream transport (Config.Stream)
// or over descriptors, as the uid-0 agent's Config asked.
const (
	userAgentStream = "stream"
	userAgentFD     = "fd"
)

// userAgentBridgeFD is the egress bridge's listener in a user's agent
// that serves it over the stream (keepBridgeListener): the uid-0 agent
// bound it before any user code ran.
const userAgentBridgeFD = ControlFD + 1

// serveThroughUserAgent starts the user's agent with the control
// connection, locks this process down and waits for it; the session ends
// with it.
func serveThroughUserAgent(cfg *Config, ctl *os.File) int {
	transport := userAgentFD
	if cfg.Stream {
		transport = userAgentStream
	}
	cmd := &exec.Cmd{
		Path:        BoxedPath,
		Args:        []string{BoxedPath, boxedUserAgent, strconv.Itoa(userUID), strconv.Itoa(userGID), transport},
		Env:         []string{},
		ExtraFiles:  []*os.File{ctl},
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID},
	}
	if bridgeListener != nil {
		// The bridge over the stream is the user's agent's: its listener
		// is userAgentBridgeFD there, and its pace follows the transport.
		cmd.ExtraFiles = append(cmd.ExtraFiles, bridgeListener)
		cmd.Args = append(cmd.Args, strconv.FormatFloat(cfg.EgressRate, 'g', -1, 64), strconv.Itoa(cfg.EgressBurst))
	}
	err := cmd.Start()
	if bridgeListener != nil {
		// the user's agent holds its own copy now, or never started
		_ = bridgeListener.Close()
		bridgeListener = nil
	}
	if err != nil {
		// the host reads this; it fails only once the host hung up, and then nobody is left to tell
		_ = json.NewEncoder(ctl).Encode(Event{Kind: EventFailed, Status: &Status{Error: "starting the user's agent: " + err.Error()}})
		return 0
	}
	// The user's agent owns the connection now (and over the stream the
	// bridge too); this process keeps only what its egress bridge over
	// descriptors needs, which is no capability.
	ctl.Close()
	if err := lockdownAllThreads(); err != nil {
		// Unlocked, this process must not outlive the session's start:
		// its exit ends the box (it is PID 1), whether or not the kill,
		// which needs CAP_KILL it may have dropped already, succeeds.
		fmt.Fprintf(os.Stderr, "warden-init: locking down the agent after starting the user's agent: %v\n", err)
		if err := cmd.Process.Kill(); err != nil {
			fmt.Fprintf(os.Stderr, "warden-init: killing the user's agent: %v\n", err)
		}
		return ExitAgentUnlocked
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		return exit.ExitCode()
	}
	if err != nil {
		return ExitUserAgentDied
	}
	return 0
}

// lockdownAllThreads takes from every thread of this process (the uid-0
// agent, once the user's agent has started) every capability, its
// bounding and ambient sets, and sets no_new_privs on each; then it locks
// this thread down as lockdown does (seccomp). What the process still
// does, waiting for the user's agent and, over descriptors, serving the
// egress bridge (accept on loopback, passing descriptors over unix
// sockets), needs no capability.
func lockdownAllThreads() error {
	if err := dropBoundingAllThreads(); err != nil {
		return err
	}
	// EINVAL: a kernel without ambient capabilities (gVisor's among
	// them), where there are none to clear.
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 && e != unix.EINVAL {
		return fmt.Errorf("clearing ambient capabilities on every thread: %w", e)
	}
	if err := capsetAllThreads(nil); err != nil {
		return err
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return fmt.Errorf("setting no_new_privs on every thread: %w", e)
	}
	agentCaps = nil
	return lockdown(userAgentConfig)
}

// dropBoundingAllThreads empties every thread's bounding set, which
// needs CAP_SETPCAP, so it comes before any capability is dropped.
func dropBoundingAllThreads() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		_, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0)
		if e != 0 && e != unix.EINVAL {
			return fmt.Errorf("dropping bounding capability %d on every thread: %w", c, e)
		}
	}
	return nil
}

// userAgentConfig is what the agents of a gVisor box lock down by: the
// user's agent is started only there (Config.HideAgent), and gVisor's
// kernel answers sysinfo(2) itself (Config.KernelSysinfo), so neither
// installs the notifying filter nor starts an answerer.
var userAgentConfig = &Config{KernelSysinfo: true}

// userAgent is the user's agent's main: args are the sandbox user's uid
// and gid and the transport (userAgentStream or userAgentFD).
func userAgent(args []string) int {
	ctl := os.NewFile(ControlFD, "control")
	// The connection came as an inherited descriptor, which every
	// process forked would inherit in turn: the user's code could speak
	// the agent's protocol to the host.
	if err := closeInherited(); err != nil {
		// the host reads this; it fails only once the host hung up, and then nobody is left to tell
		_ = json.NewEncoder(ctl).Encode(Event{Kind: EventFailed, Status: &Status{Error: "the user's agent: closing inherited descriptors: " + err.Error()}})
		return 0
	}
	if err := becomeUserAgent(args); err != nil {
		// the host reads this; it fails only once the host hung up, and then nobody is left to tell
		_ = json.NewEncoder(ctl).Encode(Event{Kind: EventFailed, Status: &Status{Error: "the user's agent: " + err.Error()}})
		return 0
	}
	cfg := *userAgentConfig
	cfg.Stream = args[2] == userAgentStream
	if len(args) == 5 {
		if err := serveUserBridge(args[3], args[4]); err != nil {
			// the host reads this; it fails only once the host hung up, and then nobody is left to tell
			_ = json.NewEncoder(ctl).Encode(Event{Kind: EventFailed, Status: &Status{Error: "the user's agent: " + err.Error()}})
			return 0
		}
	}
	return serveSession(&cfg, ctl)
}

// serveUserBridge serves the egress bridge on the listener the uid-0
// agent handed over (userAgentBridgeFD), paced by rate and burst, a
// channel of this agent's stream per connection (streamEgress). The
// bridge is no boundary: whatever the user's code sends through it, the
// host's proxy, on the far end of every channel, decides.
func serveUserBridge(rate, burst string) error {
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || r < 0 {
		return fmt.Errorf("the bridge's rate %q is no rate", rate)
	}
	b, err := strconv.Atoi(burst)
	if err != nil || b < 0 {
		return fmt.Errorf("the bridge's burst %q is no burst", burst)
	}
	f := os.NewFile(userAgentBridgeFD, "egress bridge")
	ln, err := net.FileListener(f)
	// FileListener made its own descriptor, close-on-exec
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("taking the egress bridge's listener: %w", err)
	}
	serveBridgeOn(ln, egress.Pace{Rate: r, Burst: b}, streamEgress.dial, relay)
	return nil
}

// userAgentArgsOK says whether args are the user's agent's: uid, gid
// and transport, and over the stream maybe two more, the egress bridge's
// pace (serveUserBridge).
func userAgentArgsOK(args []string) bool {
	switch len(args) {
	case 3:
		return args[2] == userAgentStream || args[2] == userAgentFD
	case 5:
		return args[2] == userAgentStream
	default:
		return false
	}
}

// becomeUserAgent gives the namespace its /proc and this process the
// sandbox user's identity.
func becomeUserAgent(args []string) error {
	if !userAgentArgsOK(args) {
		return fmt.Errorf("want the user's uid, gid and transport (%s or %s), with %s maybe the egress bridge's rate and burst, got %q", userAgentStream, userAgentFD, userAgentStream, args)
	}
	uid, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("user's uid %q: %w", args[0], err)
	}
	gid, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("user's gid %q: %w", args[1], err)
	}
	if err := mountUserProc(); err != nil {
		return err
	}
	if err := becomeUser(uid, gid); err != nil {
		return err
	}
	guardSignals()
	return recordSched()
}

// mountUserProc mounts the namespace's /proc over the box's and covers
// this process's own entry, /proc/1, with an empty read-only directory
// of mode 0.
func mountUserProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting the user's /proc: %w", err)
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("none", "/proc/1", "tmpfs", flags, "mode=0"); err != nil {
		return fmt.Errorf("mounting over /proc/1: %w", err)
	}
	return nil
}

// becomeUser empties every thread's bounding set (which needs
// CAP_SETPCAP, lost with uid 0) and makes every thread the sandbox user,
// which clears its capabilities; non-dumpable, its /proc files that are
// not world-readable belong to root. What it forks needs no capability
// then, and lockdown keeps none.
func becomeUser(uid, gid int) error {
	if err := dropBoundingAllThreads(); err != nil {
		return err
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid %d: %w", uid, err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the user's agent non-dumpable: %w", err)
	}
	userUID, userGID = uid, gid
	agentCaps = nil
	return nil
}
