package nsinit

import (
	"errors"
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

// TestExecPlanSteps: the plan takes the Go init's steps (nativeSteps)
// in their order, each op's context starting with its step's name as
// setup wraps the step's error, then the lockdown's and the program's;
// it carries the notifying filter, the rlimits setRlimits sets and the
// program as the Go init starts it.
func TestExecPlanSteps(t *testing.T) {
	cfg := fastConfig(t)
	fp, err := ExecPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := fp.Plan("/sys/fs/cgroup/memory/x/memory.usage_in_bytes", -1)
	var goSteps []string
	for _, s := range nativeSteps() {
		goSteps = append(goSteps, s.what)
	}
	// What lockdown and start do after nativeSteps, in the same words.
	tail := []string{"closing the descriptors warden inherited", "opening /proc for the sysinfo answerer", "starting the sysinfo answerer", "installing seccomp filter",
		"setting the program's environment", `starting "python3"`}
	at := 0
	for i, op := range p.Ops {
		if j := slices.IndexFunc(goSteps, func(s string) bool { return strings.HasPrefix(op.Context, s) }); j >= 0 {
			if j < at {
				t.Errorf("op %d (%s, %q) comes after step %q in the plan but before it in nativeSteps", i, op.Code, op.Context, goSteps[at])
			}
			at = j
			continue
		}
		if !slices.Contains(tail, op.Context) && !strings.HasPrefix(op.Context, "opening the cgroup's memory usage") {
			t.Errorf("op %d (%s) has context %q, which names no step of the Go init", i, op.Code, op.Context)
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
