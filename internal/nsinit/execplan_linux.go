package nsinit

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/seccomp"
)

// Descriptors a fast plan opens for warden-exec's sysinfo answerer, after
// EtcFD: the box cgroup's memory usage (before the pivot, at its host
// path) and the new root's /proc (after it). UsageFD is MemoryEventsFD's
// number too, which only a boxed session uses: ExecPlan refuses those.
const (
	UsageFD = EtcFD + 1
	ProcFD  = EtcFD + 2
)

// MinFastOpenFiles is the lowest RLIMIT_NOFILE warden-exec is given: its
// PID 1 holds descriptors up to 14 (the plan's 8 to 10, the drain's
// pipes, its signalfd, the seccomp listener, the start pipe), so below 15
// it fails where the Go init (which needs 13 to 14) may start the
// program, and measured with --memory and an output limit it starts one
// from 15; one more leaves its sysinfo answerer a spare descriptor.
// Below it the Go init builds the box, so the Result is the Go init's.
const MinFastOpenFiles = 16

// FastPlan is a one-shot Config written as a plan for warden-exec: the
// steps nativeSteps, lockdown and start take, in their order, each op's
// context worded as the Go init words the step's error, so that FromPlan
// gives the same Status. It lives here, beside those steps, so that a
// step added to one is seen missing from the other (TestExecPlanSteps).
type FastPlan struct {
	cfg    *Config
	root   *plan.Plan
	filter []unix.SockFilter
}

// ExecPlan prepares cfg's plan on the host, before the clone, so that a
// Config outside warden-exec's reach is refused (wrapping ErrNotFast, in
// a line naming the feature) while the Go init can still take it: a
// session, a template's root, the egress bridge, a workspace the init
// must reopen by path, a root rootfs.Plan cannot plan from this host's
// /proc, an RLIMIT_NOFILE below MinFastOpenFiles, or a plan over the
// executor's bounds (fits).
func ExecPlan(cfg *Config) (*FastPlan, error) {
	switch {
	case cfg.Session || cfg.Boxed:
		return nil, &NotFastError{Feature: "a session's agent"}
	case cfg.Root != "" || cfg.SeedMount:
		return nil, &NotFastError{Feature: "a template's root"}
	case cfg.EgressPort != 0:
		return nil, &NotFastError{Feature: "--net proxy (the egress bridge)"}
	case cfg.HostScratch:
		return nil, &NotFastError{Feature: "a host scratch (a session's persistent files)"}
	case cfg.Workspace && !cfg.WorkspaceIsMount:
		return nil, &NotFastError{Feature: "a workspace without an idmapped mount (rootless, or a filesystem without idmapping, which the init reopens by path)"}
	case cfg.KernelSysinfo:
		return nil, &NotFastError{Feature: "a box whose kernel answers sysinfo"}
	case cfg.Rlimits.OpenFiles != 0 && cfg.Rlimits.OpenFiles < MinFastOpenFiles:
		return nil, &NotFastError{Feature: fmt.Sprintf("--open-files below %d (warden-exec's PID 1 holds more descriptors than the Go init)", MinFastOpenFiles)}
	}
	root, err := rootfs.Plan(newRoot, rootOptions(cfg))
	if err != nil {
		return nil, &NotFastError{Feature: "the root on this host", Detail: err.Error()}
	}
	// Worded once here, not on each Plan: a run builds its plan twice
	// (fits, then as sent), and a root has some 165 ops.
	for i := range root.Ops {
		root.Ops[i].Context = "building the root: " + root.Ops[i].Context
	}
	filter, err := seccomp.NotifyingProgram()
	if err != nil {
		return nil, err
	}
	fp := &FastPlan{cfg: cfg, root: root, filter: filter}
	if err := fp.fits(); err != nil {
		return nil, err
	}
	return fp, nil
}

// planFixedOps is the number of ops Plan adds besides the root's and one
// per rlimit, its optional ones (JoinCgroup, the usage OpenFD, Drain)
// counted, so that the plan's ops are allocated once.
// TestPlanBuiltCheaply builds a plan with every optional op and rlimit
// and wants exactly this capacity, so an op added or removed without
// changing it fails there.
const planFixedOps = 16

// Plan is the whole plan. usage is the host path of the box cgroup's
// memory.usage_in_bytes, which the answerer reads as the Go init's does
// ("" for none: no cgroup, or no memory controller); drain, when not
// negative, is the output limit PID 1 relays up to (op Drain).
func (f *FastPlan) Plan(usage string, drain int64) *plan.Plan {
	cfg := f.cfg
	limits := rlimits(cfg)
	p := &plan.Plan{Ops: make([]plan.Op, 0, len(f.root.Ops)+planFixedOps+len(limits))}
	add := func(ctx string, code plan.Code, ints []uint64, strs ...string) {
		p.Add(plan.Op{Code: code, Ints: ints, Strs: strs, Context: ctx})
	}
	// Descriptors from EtcFD up are none the host passed: ones warden
	// inherited without close-on-exec, which the plan's own OpenFDs
	// would find busy. The Go init marks them close-on-exec below.
	add("closing the descriptors warden inherited", plan.CloseRange, []uint64{EtcFD, ^uint64(0), 0})
	if cfg.AwaitCgroup {
		add("joining the cgroup", plan.JoinCgroup, []uint64{ControlFD, maxCgroupFiles})
	}
	usageFD := ^uint64(0)
	if usage != "" {
		usageFD = UsageFD
		add("opening the cgroup's memory usage for the sysinfo answerer", plan.OpenFD, []uint64{unix.O_RDONLY | unix.O_NOFOLLOW, UsageFD}, usage)
	}
	add("entering a cgroup namespace", plan.Unshare, []uint64{unix.CLONE_NEWCGROUP})
	add("closing inherited descriptors", plan.CloseRange, []uint64{ControlFD, ^uint64(0), unix.CLOSE_RANGE_CLOEXEC})
	add("setting file identity", plan.FileIdentity, []uint64{uint64(userUID), uint64(userGID)})
	add("tying the sandbox to the host", plan.DieWithHost, []uint64{uint64(unix.SIGKILL), ControlFD})
	add("setting hostname", plan.Sethostname, nil, cfg.Hostname)
	add("bringing up lo", plan.LinkUp, nil, "lo")
	p.Ops = append(p.Ops, f.root.Ops...)
	add("limiting the CPUs in view", plan.LimitCPUs, []uint64{uint64(max(cfg.View.CPUs, 0))})
	// Before the rlimits, as a low RLIMIT_NOFILE would refuse ProcFD; the
	// Go init opens it at its lowest free descriptor in lockdown.
	add("opening /proc for the sysinfo answerer", plan.OpenFD, []uint64{unix.O_RDONLY | unix.O_DIRECTORY, ProcFD}, "/proc")
	for _, l := range limits {
		if l.val != 0 {
			add(fmt.Sprintf("setting rlimits: %s=%d", l.name, l.val), plan.Setrlimit, []uint64{uint64(l.res), l.val})
		}
	}
	if drain >= 0 {
		add("relaying the program's output", plan.Drain, []uint64{uint64(drain), uint64(drain)})
	}
	add("starting the sysinfo answerer", plan.Sysinfo, []uint64{uint64(max(cfg.View.MemoryBytes, 0)), usageFD, ProcFD, uint64(userUID), uint64(userGID)})
	add("installing seccomp filter", plan.Seccomp, filterInts(f.filter))
	add("setting the program's environment", plan.Env, nil, cfg.Env...)
	// warden-exec reports a failure to prepare PID 1's loop at this op,
	// and a failed pipe or fork as the program's start (StatusExec), as
	// the Go init's fork/exec (its lockdown's failures name their own step).
	add(fmt.Sprintf("starting %q", cfg.Command[0]), plan.Exec, []uint64{uint64(userUID), uint64(userGID)}, append([]string{cfg.Command[0], workdir}, cfg.Command...)...)
	return p
}

// filterInts is a seccomp program as op Seccomp's ints.
func filterInts(prog []unix.SockFilter) []uint64 {
	ints := make([]uint64, len(prog))
	for i, ins := range prog {
		ints[i] = uint64(ins.Code) | uint64(ins.Jt)<<16 | uint64(ins.Jf)<<24 | uint64(ins.K)<<32
	}
	return ints
}
