package nsinit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/seccomp"
)

// fastConfig is a one-shot Config warden-exec can build: the host's root,
// v1 cgroup, rlimits, no workspace.
func fastConfig(t *testing.T) *Config {
	return &Config{
		Command: []string{"python3", "-c", "print(1)"}, Env: []string{"PATH=/usr/bin:/bin"}, Hostname: "sandbox",
		Etc: rootfs.EtcTemplate{Dir: t.TempDir()}, View: rootfs.View{MemoryBytes: 1 << 30, CPUs: 1},
		AwaitCgroup: true, DiskBytes: 64 << 20, Inodes: 1000,
		Rlimits: Rlimits{CPUSeconds: 5, OpenFiles: 64, Processes: 10},
	}
}

// TestExecPlanRefuses: a Config whose set-up the Go init decides at run
// time is refused before the clone, in one line naming the feature.
func TestExecPlanRefuses(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"session", func(c *Config) { c.Session = true }, "a session's agent needs the Go init"},
		{"template", func(c *Config) { c.Root = "/var/lib/warden/t" }, "a template's root needs the Go init"},
		{"proxy", func(c *Config) { c.EgressPort = 8080 }, "--net proxy (the egress bridge) needs the Go init"},
		{"workspace by path", func(c *Config) { c.Workspace, c.WorkspacePath = true, "/srv/ws" }, "reopens by path"},
		{"host scratch", func(c *Config) { c.Workspace, c.WorkspaceIsMount, c.HostScratch = true, true, true }, "a host scratch"},
		{"no /etc template", func(c *Config) { c.Etc.Dir = "" }, "the root on this host"},
		{"low open files", func(c *Config) { c.Rlimits.OpenFiles = MinFastOpenFiles - 1 }, "--open-files below 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig(t)
			tt.edit(cfg)
			_, err := ExecPlan(cfg)
			if !errors.Is(err, ErrNotFast) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("ExecPlan: %v, want one line wrapping ErrNotFast and containing %q", err, tt.want)
			}
		})
	}
}

// notInPlan are the Go init's steps (nativeSteps) no op of a fast plan
// takes, each with why: a step added to nativeSteps must be planned or
// listed here, so the two cannot drift apart (one source of truth).
var notInPlan = map[string]string{
	"reopening the workspace":       "ExecPlan refuses a workspace the init reopens by path; an idmapped one is the host's mount",
	"reopening the template's root": "ExecPlan refuses a template's root",
	"opening oom_score_adj":         "only a session's agent opens it, and ExecPlan refuses sessions",
	"limiting SysV IPC":             "only a session lives on after its process, and ExecPlan refuses sessions",
	"starting the egress bridge":    "ExecPlan refuses --net proxy",
}

// planStep is one entry of the exact op sequence a fast plan must be:
// the op's code and context (a prefix when prefix), repeated when many
// (the root's ops, one Setrlimit per limit; code 0 matches any).
type planStep struct {
	code         plan.Code
	ctx          string
	prefix, many bool
}

// wantPlanSteps is the whole plan of fastConfig with a memory usage file
// and an output limit, in order: the Go init's steps (nativeSteps, named
// as setup wraps their errors) and lockdown's and start's after them.
var wantPlanSteps = []planStep{
	{code: plan.CloseRange, ctx: "closing the descriptors warden inherited"},
	{code: plan.JoinCgroup, ctx: "joining the cgroup"},
	{code: plan.OpenFD, ctx: "opening the cgroup's memory usage for the sysinfo answerer"},
	{code: plan.Unshare, ctx: "entering a cgroup namespace"},
	{code: plan.CloseRange, ctx: "closing inherited descriptors"},
	{code: plan.FileIdentity, ctx: "setting file identity"},
	{code: plan.DieWithHost, ctx: "tying the sandbox to the host"},
	{code: plan.Sethostname, ctx: "setting hostname"},
	{code: plan.LinkUp, ctx: "bringing up lo"},
	{ctx: "building the root: ", prefix: true, many: true},
	{code: plan.LimitCPUs, ctx: "limiting the CPUs in view"},
	{code: plan.OpenFD, ctx: "opening /proc for the sysinfo answerer"},
	{code: plan.Setrlimit, ctx: "setting rlimits: ", prefix: true, many: true},
	{code: plan.Drain, ctx: "relaying the program's output"},
	{code: plan.Sysinfo, ctx: "starting the sysinfo answerer"},
	{code: plan.Seccomp, ctx: "installing seccomp filter"},
	{code: plan.Env, ctx: "setting the program's environment"},
	{code: plan.Exec, ctx: `starting "python3"`},
}

// matches says whether op is step s.
func (s planStep) matches(op plan.Op) bool {
	if s.code != 0 && op.Code != s.code {
		return false
	}
	return op.Context == s.ctx || (s.prefix && strings.HasPrefix(op.Context, s.ctx))
}

// checkPlanSequence fails t unless ops are exactly want, in order.
func checkPlanSequence(t *testing.T, ops []plan.Op, want []planStep) {
	t.Helper()
	i := 0
	for _, s := range want {
		if i >= len(ops) || !s.matches(ops[i]) {
			t.Errorf("op %d: got %s, want %s %q", i, opString(ops, i), s.code, s.ctx)
			return
		}
		for i++; s.many && i < len(ops) && s.matches(ops[i]); i++ {
		}
	}
	if i != len(ops) {
		t.Errorf("op %d: got %s after the program's Exec, want none", i, opString(ops, i))
	}
}

// opString names ops[i] for a message.
func opString(ops []plan.Op, i int) string {
	if i >= len(ops) {
		return "the end of the plan"
	}
	return fmt.Sprintf("%s %q", ops[i].Code, ops[i].Context)
}

// TestExecPlanSteps: the plan is exactly wantPlanSteps, and every step
// of the Go init (nativeSteps) is one of its ops or on notInPlan; it
// carries the notifying filter, the rlimits setRlimits sets and the
// program as the Go init starts it.
func TestExecPlanSteps(t *testing.T) {
	cfg := fastConfig(t)
	fp, err := ExecPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := fp.Plan("/sys/fs/cgroup/memory/x/memory.usage_in_bytes", 1024)
	checkPlanSequence(t, p.Ops, wantPlanSteps)
	for _, s := range nativeSteps() {
		planned := slices.ContainsFunc(p.Ops, func(op plan.Op) bool { return strings.HasPrefix(op.Context, s.what) })
		why, listed := notInPlan[s.what]
		switch {
		case planned && listed:
			t.Errorf("step %q is planned but listed in notInPlan (%s)", s.what, why)
		case !planned && !listed:
			t.Errorf("step %q of nativeSteps has no op in the plan: plan it in ExecPlan, or list it in notInPlan with why", s.what)
		}
	}
	last := p.Ops[len(p.Ops)-1]
	if last.Code != plan.Exec || !slices.Equal(last.Strs, []string{"python3", workdir, "python3", "-c", "print(1)"}) {
		t.Errorf("last op %s %q, want the program's Exec in %s", last.Code, last.Strs, workdir)
	}
	var limits [][]uint64
	var filter []uint64
	for _, op := range p.Ops {
		switch op.Code {
		case plan.Setrlimit:
			limits = append(limits, op.Ints)
		case plan.Seccomp:
			filter = op.Ints
		}
	}
	var want [][]uint64
	for _, l := range rlimits(cfg) {
		if l.val != 0 {
			want = append(want, []uint64{uint64(l.res), l.val})
		}
	}
	if !slices.EqualFunc(limits, want, slices.Equal) {
		t.Errorf("Setrlimit ops %v, want %v", limits, want)
	}
	prog, err := seccomp.NotifyingProgram()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(filter, filterInts(prog)) || len(filter) != seccomp.NotifyingLen() {
		t.Errorf("the Seccomp op holds %d instructions, not the notifying filter's %d", len(filter), seccomp.NotifyingLen())
	}
	if _, err := plan.Encode(p); err != nil {
		t.Errorf("encoding the plan: %v", err)
	}
}
