package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Pod's init (BoxedPod) is the boxed agent in a Kubernetes Pod's
// container, started by internal/podinit for each authenticated
// connection. The Pod runs it as a non-root uid with every capability
// dropped (Pod Security's restricted profile), so it cannot change ids:
// the user's processes run as the agent's own uid, and what the agent
// still applies to them is no_new_privs, its seccomp filter, the rlimits
// and the CPU affinity. The container and its RuntimeClass (gVisor) are
// the box: namespaces, root, mounts and the Pod's cgroup. With the
// egress proxy (Config.EgressPort) the agent runs the same bridge as a
// microVM's: it listens on the Pod's 127.0.0.1 and opens a stream
// channel per connection, which the router connects to the session's
// socket on its own egress proxy; the Pod itself needs no egress.

// podMode says this agent serves a Pod (BoxedPod).
var podMode bool

// enterPodMode sets pod mode before the agent reads its Config: it opens
// oom_score_adj while the process is still dumpable (afterwards
// /proc/self is root's, and a uid without capabilities cannot write it),
// and makes the agent the child subreaper, so that the orphans of the
// user's processes reach it (sweepOrphans) rather than the Pod's PID 1.
func enterPodMode() error {
	podMode = true
	// The user's processes run as the agent's uid: it keeps no
	// capability to hand them (lockdown keeps agentCaps).
	agentCaps = nil
	fd, err := unix.Open("/proc/self/oom_score_adj", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening oom_score_adj: %w", err)
	}
	oomScore = fd
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming the child subreaper: %w", err)
	}
	return nil
}

// podSteps are setup's steps in a Pod: the user is the agent's own uid,
// nothing is built, and no id or capability can change.
func podSteps() []setupStep {
	return []setupStep{
		{"checking the Pod's Config", checkPodConfig},
		{"checking the Pod's privileges", func(*Config) error { return checkUnprivileged() }},
		{"closing inherited descriptors", func(*Config) error { return closeInherited() }},
		{"tying the sandbox to the host", func(*Config) error { return dieWithHost() }},
		{"setting rlimits", setPodRlimits},
		{"limiting the CPUs in view", limitCPUs},
		{"starting the egress bridge", startBridge},
	}
}

// podProcesses is the RLIMIT_NPROC of the user's processes in a Pod,
// which podExec sets in each of them rather than the agent in itself.
var podProcesses uint64

// setPodRlimits sets the rlimits but RLIMIT_NPROC, which counts every
// process and thread of the uid, the agent's and the init's among them:
// as the agent's own limit, a user's processes that reached it would
// leave the agent no thread to start, and Go's runtime ends a process
// that cannot start one. So the agent keeps the Pod's limit and each
// process it starts sets the session's in itself before it runs the
// user's program (podExec): the user's forks stop at the limit, the
// agent's threads do not.
func setPodRlimits(cfg *Config) error {
	podProcesses = cfg.Rlimits.Processes
	c := *cfg
	c.Rlimits.Processes = 0
	return setRlimits(&c)
}

// boxedPodExec, as a Pod's agent's first argument, makes it the
// trampoline of a user's process: "BoxedPath boxedPodExec NPROC ERRFD
// PATH ARGV...". It is forked and started by the agent (podCommand) with
// the process's descriptors, directory and environment, already under
// the agent's seccomp filter and no_new_privs.
const boxedPodExec = "pod-exec"

// podStartWait bounds how long the agent waits for a trampoline to exec
// or report its failure: the user's processes, which share its uid,
// could stop it before it does, and the agent must not wait for good.
const podStartWait = 30 * time.Second

// A trampoline's report on its error descriptor: a stage byte, then the
// errno, little-endian.
const (
	stageLimit = 'l' // setting RLIMIT_NPROC
	stageExec  = 'x' // execve
	reportSize = 5
)

// podCommand is the path and arguments that start the user's program
// path with argv in a Pod: through podExec, which sets RLIMIT_NPROC
// first and reports a failure on descriptor errFD.
func podCommand(path string, argv []string, errFD int) (string, []string) {
	return "/proc/self/exe", append([]string{BoxedPath, boxedPodExec, strconv.FormatUint(podProcesses, 10), strconv.Itoa(errFD), path}, argv...)
}

// podExec sets RLIMIT_NPROC, soft and hard, and execs the user's
// program; it returns only on failure, with the exit code a shell would
// give (127 for a missing file, 126 otherwise), having reported why to
// the agent on its error descriptor, close-on-exec (os/exec's way: the
// agent reads its end until the exec closes it), or on the program's
// stderr when there is none.
func podExec(args []string) int {
	if len(args) < 4 {
		fmt.Fprintf(os.Stderr, "warden: usage: %s %s NPROC ERRFD PATH ARGV...\n", BoxedPath, boxedPodExec)
		return 126
	}
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden: the process limit %q: %v\n", args[0], err)
		return 126
	}
	fd, err := strconv.Atoi(args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden: the error descriptor %q: %v\n", args[1], err)
		return 126
	}
	unix.CloseOnExec(fd)
	if n > 0 {
		if err := syscall.Setrlimit(unix.RLIMIT_NPROC, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			return podExecFailed(fd, stageLimit, err)
		}
	}
	return podExecFailed(fd, stageExec, unix.Exec(args[2], args[3:], os.Environ()))
}

// podExecFailed reports err of stage on fd, or on stderr if it cannot,
// and returns the trampoline's exit code.
func podExecFailed(fd int, stage byte, err error) int {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = syscall.EINVAL
	}
	msg := []byte{stage, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(msg[1:], uint32(errno))
	if _, werr := unix.Write(fd, msg); werr != nil {
		fmt.Fprintf(os.Stderr, "warden: starting the program: %v\n", err)
	}
	if errors.Is(err, unix.ENOENT) {
		return 127
	}
	return 126
}

// podStartReport reads a trampoline's report from r, the read end of its
// error descriptor (the agent closed its copy of the write end): nil
// when the program was exec'd (the descriptor closed, empty), or the
// start's failure, also when the trampoline neither execs nor reports
// within podStartWait. name is the command as asked, path as found.
func podStartReport(r *os.File, name, path string) *Status {
	var buf [reportSize]byte
	err := r.SetReadDeadline(time.Now().Add(podStartWait))
	n := 0
	if err == nil {
		n, err = io.ReadFull(r, buf[:])
	}
	if n == 0 && errors.Is(err, io.EOF) {
		return nil
	}
	errno := syscall.Errno(binary.LittleEndian.Uint32(buf[1:]))
	var st Status
	switch {
	case n == reportSize && buf[0] == stageExec:
		st = startFailed(name, &os.PathError{Op: "fork/exec", Path: path, Err: errno})
	case n == reportSize && buf[0] == stageLimit:
		st = Status{ExitCode: 126, StartFailed: true, Error: fmt.Sprintf("starting %q: setting RLIMIT_NPROC=%d: %v", name, podProcesses, errno)}
	default:
		st = Status{ExitCode: 126, StartFailed: true, Error: fmt.Sprintf("starting %q: the trampoline neither ran it nor said why within %v (read %d bytes: %v)", name, podStartWait, n, err)}
	}
	return &st
}

// endTrampoline kills and reaps the trampoline at pid, which reported a
// failure or nothing in time; pid is a child's, never 0 or negative
// (kill(2) would reach a group or every process).
func endTrampoline(pid int) {
	if pid <= 0 {
		return
	}
	// ESRCH only: it has ended already
	_ = unix.Kill(pid, unix.SIGKILL)
	reapOne(pid)
}

// reapOne reaps pid; ECHILD means the agent's reaper was first, which
// finds no exec of it.
func reapOne(pid int) {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// checkPodConfig refuses what a Pod's agent cannot do, and makes the
// user the agent's own ids.
func checkPodConfig(cfg *Config) error {
	switch {
	case !cfg.Session || !cfg.Boxed:
		return errors.New("a Pod's agent serves boxed sessions only (Config.Session and Config.Boxed)")
	case !cfg.Stream:
		return errors.New("a Pod's agent serves the stream transport only (Config.Stream)")
	case !cfg.KernelSysinfo:
		return errors.New("a Pod's agent cannot answer sysinfo(2) (no cgroup of its own to read): set Config.KernelSysinfo and let the Pod's kernel (gVisor's) answer")
	case cfg.HideAgent:
		return errors.New("a Pod's agent cannot hide in a PID namespace of the user's (no CAP_SYS_ADMIN): leave Config.HideAgent unset")
	case cfg.UID != 0 && cfg.UID != os.Getuid(), cfg.GID != 0 && cfg.GID != os.Getgid():
		return fmt.Errorf("a Pod's user runs as the Pod's own uid and gid (%d:%d), not %d:%d: leave Config.UID and GID unset", os.Getuid(), os.Getgid(), cfg.UID, cfg.GID)
	}
	userUID, userGID = os.Getuid(), os.Getgid()
	return nil
}

// checkUnprivileged refuses an agent that is root or holds any
// capability, even in its bounding set, which it could not drop without
// CAP_SETPCAP: the Pod's securityContext must drop them all, or a
// setuid binary in the image or root's ids would undo every layer the
// agent applies.
func checkUnprivileged() error {
	if os.Getuid() == 0 || os.Geteuid() == 0 || os.Getgid() == 0 || os.Getegid() == 0 {
		return errors.New("running as root: a Pod's agent runs as a non-root uid (securityContext runAsNonRoot, runAsUser and runAsGroup, e.g. 65532)")
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading the capabilities: %w", err)
	}
	for _, d := range data {
		if d.Permitted|d.Effective|d.Inheritable != 0 {
			return errors.New("holding capabilities: the Pod must drop them all (securityContext.capabilities.drop: [\"ALL\"])")
		}
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in != 0 {
			return fmt.Errorf("capability %d is in the bounding set: the Pod must drop them all (securityContext.capabilities.drop: [\"ALL\"])", c)
		}
	}
	return nil
}
