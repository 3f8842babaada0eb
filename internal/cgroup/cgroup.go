// Package cgroup puts each sandbox in a control group of its own, so that its memory, process
// count and CPU share are capped by the kernel and its resource use can be read back when it ends.
//
// One small interface covers both kernel designs, because Warden must run on either: cgroup v1
// (one hierarchy per controller, as on this project's hybrid development host) and cgroup v2 (one
// unified hierarchy, as on current distributions).
//
// The package reads and writes the cgroup files itself, with raw syscalls, instead of using
// containerd/cgroups: that library links protobuf, whose init hashes the whole executable in
// every process (and the warden binary is re-executed as every sandbox's init), and it does more
// file operations per sandbox than the handful Warden needs.
//
// Where a sandbox's cgroup lives:
//
//   - v1: <own>/warden/<name> in each of the memory, pids, cpu and cpuacct hierarchies, where
//     <own> is the calling process's cgroup there. Nesting under the own cgroup is what makes a
//     delegated subtree or a container's cgroup work without root, and keeps the sandboxes
//     accounted to whatever limits Warden itself runs under.
//   - v2 as root (able to write the hierarchy's top): <top>/warden/<name>. v2 lets a cgroup
//     give controllers to its children only while it has no processes of its own, which
//     Warden's own cgroup always has; the root cgroup is exempt.
//   - v2 rootless, in a delegated cgroup (systemd-run --user --scope -p Delegate=yes):
//     <own>/warden/<name>; when controllers must be enabled in <own> and it has processes,
//     Warden first moves itself into the leaf <own>/supervisor, as systemd's delegation
//     documentation prescribes.
//
// Names are <ownerpid>-<random> (see boxname.New), so that after a crash RemoveStale can tell which
// leftovers belong to a Warden that is gone.
package cgroup

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// Limits are what a sandbox asks for; zero means "no limit".
//
// A non-zero limit is a promise to the user, so New never creates a cgroup without one it was
// asked for: it fails with an error wrapping ErrControllerUnavailable instead.
type Limits struct {
	// MemoryBytes caps RAM; swap is capped at zero extra, so the limit cannot be
	// sidestepped by swapping.
	MemoryBytes int64
	// Pids caps the number of processes and threads, which is what stops fork bombs.
	Pids int64
	// CPUs caps CPU time as a number of CPUs' worth per scheduling period (1.5 = one and a
	// half CPUs), enforced by the CFS bandwidth controller.
	CPUs float64
}

// Stats are read after the sandbox ended (before Delete). A field is zero when the controller
// that counts it was not available; the caller may then fall back to rusage.
type Stats struct {
	// CPUTime is user plus system CPU time of every process that ran in the cgroup.
	CPUTime time.Duration
	// PeakMemoryBytes is the high-water mark of memory charged to the cgroup, page cache
	// and tmpfs included; zero where the kernel does not record it (v2 before Linux 5.19).
	PeakMemoryBytes int64
	// OOMKills counts processes the kernel's OOM killer killed because of this cgroup's
	// memory limit; non-zero is how a sandbox's result is marked oom_killed.
	OOMKills uint64
}

// Cgroup is one sandbox's control group, in every hierarchy Warden uses. Its methods are safe
// to call from several goroutines.
type Cgroup interface {
	// AddProc moves a running process, with all its threads, into the cgroup in every
	// controller. Starting a process inside instead (see Placement) is cheaper and leaves no
	// moment outside the limits; AddProc is for processes that already exist.
	AddProc(pid int) error
	// Stats reads what the cgroup counted; call it after the sandbox ended, before Delete.
	Stats() (Stats, error)
	// Kill sends SIGKILL to every process in the cgroup. It is a backstop for processes
	// that escaped the normal teardown (a double-forked daemon, say); it does not wait.
	Kill() error
	// Delete removes the cgroup. It retries briefly while the kernel still lists tasks that
	// are exiting, and fails if processes remain after that.
	Delete() error
	// Path is where the cgroup lives, for messages and logs.
	Path() string
	// Placement says how to start a process directly inside the cgroup, sparing the
	// migration AddProc does: on v1 that takes a global lock which may wait for an RCU
	// grace period (measured here: 0.1 ms typically, up to 8 ms).
	Placement() Placement
	// Freeze stops every process in the cgroup and its children where they stand, keeping
	// their memory, and returns once the kernel says all of them are stopped, within timeout:
	// a frozen process uses no CPU until Thaw. A cgroup whose processes do not all stop in time
	// (a hostile box forking as fast as it can, a task in an uninterruptible sleep) is thawed
	// again and Freeze fails with ErrFreezeTimeout. Where the host has no freezer (v1 without
	// the freezer hierarchy) it fails with an error wrapping errors.ErrUnsupported.
	//
	// A signal sent to a frozen process is handled only once it is thawed, SIGKILL included:
	// kill first, then thaw, and the processes die without running again.
	Freeze(timeout time.Duration) error
	// Thaw lets the processes Freeze stopped run again; a cgroup that is not frozen is left
	// as it is.
	Thaw() error
	// Child makes a cgroup inside this one, with no limits of its own (the parent's bind
	// it), to count and kill one group of the sandbox's processes apart from the rest: a
	// session's exec. Only v1 offers it, because only v1 lets a process that may not use
	// clone3 start a child inside (see Placement.ThreadFiles); v2 answers
	// errors.ErrUnsupported. Delete the child before the parent.
	Child(name string) (Cgroup, error)
}

// Freezer stops and restarts the processes of a cgroup that Warden did not make but knows
// by name (OpenFreezer): a gVisor box's, which runsc makes. Its Freeze and Thaw behave as
// Cgroup's; Procs lists the processes directly in it, so that the caller can check that the
// cgroup holds what it means to stop before it trusts a Freeze (freezing an empty cgroup
// succeeds and stops nothing).
type Freezer interface {
	Freeze(timeout time.Duration) error
	Thaw() error
	Procs() ([]int, error)
	Path() string
}

// Placement is how a new process is born inside a cgroup: CloneInto on v2, ThreadFiles
// (with ReturnFiles) on v1.
type Placement struct {
	// CloneInto (v2) is the cgroup directory: open it and pass the descriptor to clone3
	// with CLONE_INTO_CGROUP (SysProcAttr.UseCgroupFD), so the child starts inside.
	CloneInto string
	// ThreadFiles (v1) are the "tasks" files of every hierarchy. Opened by the parent and
	// passed to the child, which writes "0" to each before doing anything else: that moves
	// only the writing thread, which the kernel does without the global lock, and every
	// process that thread forks starts inside. The kernel checks the opener's
	// credentials, so an unprivileged child can use descriptors root opened; the child
	// must close them before running anything untrusted, or that could move itself out.
	ThreadFiles []string
	// ReturnFiles (v1) are the "tasks" files of the cgroups the caller was in when New made
	// this one, in ThreadFiles' order: a thread of the caller that joined with ThreadFiles
	// to fork a child inside goes back with them, so the cgroup holds the child alone (a
	// thread left inside would make its cgroup.procs list the caller's pid).
	ReturnFiles []string
}

var (
	// ErrControllerUnavailable is wrapped by New's error (a *ControllerError) when a limit
	// was requested whose controller is missing, not delegated or not writable. Warden must
	// not run the sandbox without the limit, so there is no fallback.
	ErrControllerUnavailable = errors.New("cgroup controller unavailable")

	// ErrFreezeTimeout is wrapped by Freeze's error when the cgroup's processes did not all
	// stop in time; the cgroup has been thawed again.
	ErrFreezeTimeout = errors.New("the cgroup's processes did not all stop in time")

	// ErrNoCgroup is wrapped by New's error when no limit was requested and no cgroup could be
	// created at all (typically rootless without a delegated cgroup). The sandbox can still
	// run; the caller falls back to rusage for CPU time and peak memory, and has no OOM count.
	ErrNoCgroup = errors.New("no writable cgroup")
)

// ControllerError says which limit could not be applied and why. It wraps both
// ErrControllerUnavailable and the underlying cause (often fs.ErrPermission), so callers can
// test for either with errors.Is.
type ControllerError struct {
	// Controller is the kernel's name for it: "memory", "pids" or "cpu".
	Controller string
	// Problem says what is wrong, as a clause: "is not writable at /sys/fs/cgroup/...".
	Problem string
	// Fix is what the operator can do about it.
	Fix string
	// Err is the cause, if there is one.
	Err error
}

// Error reads like "memory limit needs the memory cgroup controller, which is not writable at
// /sys/fs/cgroup/memory/warden/1-ab: permission denied; run as root or delegate a cgroup (see
// warden doctor)".
func (e *ControllerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s limit needs the %s cgroup controller, which %s", FlagName(e.Controller), e.Controller, e.Problem)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Fix != "" {
		fmt.Fprintf(&b, "; %s", e.Fix)
	}
	return b.String()
}

// reason is the error without the "memory limit needs..." preamble, for the doctor's report.
func (e *ControllerError) reason() string {
	s := e.Problem
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// Unwrap lets errors.Is find both the sentinel and the cause.
func (e *ControllerError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrControllerUnavailable}
	}
	return []error{ErrControllerUnavailable, e.Err}
}

// FlagName is the warden flag that sets the limit a controller enforces:
// "cpus" for cpu, the controller's own name otherwise.
func FlagName(controller string) string {
	switch controller {
	case ctlCPU:
		return "cpus"
	default:
		return controller
	}
}

// The controllers Warden limits, by their kernel names (the same on v1 and v2).
const (
	ctlMemory = "memory"
	ctlPids   = "pids"
	ctlCPU    = "cpu"
)

// Fixes suggested in errors and in the doctor's report.
const (
	fixDelegate = "run as root or delegate a cgroup (see warden doctor)"
	fixMount    = "mount the controller or use a kernel that has it (see warden doctor)"
	fixScope    = "run as root, or start warden in a delegated cgroup of its own: " +
		"systemd-run --user --scope -p Delegate=yes warden ..."
	fixDoctor = "see warden doctor"
)

// validateName rejects names that could escape warden/ or that RemoveStale would attribute to
// another owner: they must be one path element, <pid>-<suffix> with this process's pid.
func validateName(name string, pid int) error {
	if name == "" || name == "." || name == ".." || len(name) > 200 ||
		strings.ContainsAny(name, "/\x00\n") || strings.Contains(name, "..") {
		return fmt.Errorf("invalid cgroup name %q: must be one path element without \"..\"", name)
	}
	owner, ok := boxname.OwnerPID(name)
	if !ok || owner != pid {
		return fmt.Errorf("invalid cgroup name %q: must start with this process's pid and a dash (%d-...), see boxname.New", name, pid)
	}
	return nil
}

// validChildName accepts the short names Child is meant for: one path element of letters,
// digits and dashes.
func validChildName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
