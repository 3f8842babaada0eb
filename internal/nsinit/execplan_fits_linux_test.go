package nsinit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestExecPlanFits: a Config whose plan warden-exec would not take (argv
// past what op Exec holds, a plan over plan.MaxBytes) is refused before
// the clone, in one line wrapping ErrNotFast, so auto takes the Go init;
// one just inside the bounds is taken, and its plan encodes with the
// longest usage path.
func TestExecPlanFits(t *testing.T) {
	// op Exec holds the path, the workdir and argv.
	maxArgv := plan.MaxStrs - 2
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" when the plan fits
	}{
		{"argv at the bound", func(c *Config) { c.Command = argv(maxArgv) }, ""},
		{"argv over the bound", func(c *Config) { c.Command = argv(maxArgv + 1) }, "over the executor's bounds"},
		{"argv of 1100", func(c *Config) { c.Command = argv(1100) }, "over the executor's bounds"},
		{"env just under a MiB", func(c *Config) { c.Env = env(8, 120000) }, ""},
		{"env over a MiB", func(c *Config) { c.Env = env(10, 120000) }, "over the executor's 1048576 bytes"},
		{"env entries over the bound", func(c *Config) { c.Env = env(plan.MaxStrs+1, 8) }, "over the executor's bounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig(t)
			tt.edit(cfg)
			fp, err := ExecPlan(cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ExecPlan: got %v, want a plan", err)
				}
				if _, err := plan.Encode(fp.Plan(longestUsage(), 0)); err != nil {
					t.Errorf("Encode of a plan ExecPlan took: got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ExecPlan: got a plan, want an error containing %q", tt.want)
			}
			if !errors.Is(err, ErrNotFast) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("ExecPlan: got %v, want one line wrapping ErrNotFast and containing %q", err, tt.want)
			}
		})
	}
}

// argv is /bin/echo and n-1 arguments.
func argv(n int) []string {
	a := []string{"/bin/echo"}
	for len(a) < n {
		a = append(a, "x")
	}
	return a
}

// env is n variables of about size bytes each.
func env(n, size int) []string {
	var e []string
	for i := range n {
		e = append(e, fmt.Sprintf("V%d=%s", i, strings.Repeat("v", size)))
	}
	return e
}

// TestExecPlanFitsEncodesNothing: the bounds are checked on the plan's
// size, not its encoding, which the run makes once, as sent: fits
// allocates no more than building the plan it checks does.
func TestExecPlanFitsEncodesNothing(t *testing.T) {
	cfg := fastConfig(t)
	cfg.Env = env(8, 4000)
	fp, err := ExecPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	build := testing.AllocsPerRun(10, func() { _ = fp.Plan(longestUsage(), 0) })
	if fits := testing.AllocsPerRun(10, func() { _ = fp.fits() }); fits > build {
		t.Errorf("fits allocates %v times, building its plan %v: want no more (no encoding)", fits, build)
	}
}

// TestPlanBuiltCheaply: Plan, which a run calls twice, words the root's
// ops once (in ExecPlan: no context prefixed twice) and allocates its
// ops once, even at its largest (every rlimit, a usage file, a drain).
func TestPlanBuiltCheaply(t *testing.T) {
	cfg := fastConfig(t)
	cfg.Rlimits.FileSizeBytes = 1 << 20
	cfg.AwaitCgroup = true // JoinCgroup; the usage path and a drain below add the other optional ops
	limits := rlimits(cfg)
	for _, l := range limits {
		if l.val == 0 {
			t.Fatalf("the test's config leaves %s unset: set it, so that every op Plan can add is counted", l.name)
		}
	}
	fp, err := ExecPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = fp.Plan(longestUsage(), 0)
	p := fp.Plan(longestUsage(), 0)
	if want := len(fp.root.Ops) + planFixedOps + len(limits); len(p.Ops) != want || cap(p.Ops) != want {
		t.Errorf("Plan's ops: %d in a capacity of %d, want exactly %d (planFixedOps %d + %d rlimits + %d root ops): update planFixedOps to the ops Plan adds", len(p.Ops), cap(p.Ops), want, planFixedOps, len(limits), len(fp.root.Ops))
	}
	roots := 0
	for _, op := range p.Ops {
		if strings.HasPrefix(op.Context, "building the root: ") {
			roots++
			if strings.Count(op.Context, "building the root: ") != 1 {
				t.Errorf("op context %q: the root's wording prefixed more than once", op.Context)
			}
		}
	}
	if roots != len(fp.root.Ops) {
		t.Errorf("%d ops worded as the root's, want %d", roots, len(fp.root.Ops))
	}
}
