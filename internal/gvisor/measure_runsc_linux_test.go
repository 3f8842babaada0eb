package gvisor

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
)

// runscRounds is how many boxes each runsc and platform starts in
// TestMeasureRunscPlatforms, and runscExecs how many execs each box runs.
const (
	runscRounds = 10
	runscExecs  = 5
)

// TestMeasureRunscPlatforms compares Debian's runsc (on its default,
// ptrace) with the pinned one on systrap and on ptrace (issue 22): a
// box's start and an exec of true in it, interleaved round by round so
// load falls on all alike. It asserts no timing (the host is shared); run
// it with WARDEN_MEASURE=1 and CGO_ENABLED=0.
func TestMeasureRunscPlatforms(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure Debian's runsc against the pinned one")
	}
	requireRunsc(t)
	configs := []struct {
		name string
		r    *Runtime
	}{
		{"debian-ptrace", &Runtime{Runsc: "/usr/bin/runsc"}},
		{"pinned-systrap", &Runtime{Runsc: DefaultRunsc, Platform: "systrap"}},
		{"pinned-ptrace", &Runtime{Runsc: DefaultRunsc, Platform: "ptrace"}},
	}
	start, exec := map[string][]time.Duration{}, map[string][]time.Duration{}
	for round := range runscRounds + 1 {
		for _, c := range configs {
			if _, err := FindRunsc(c.r.Runsc); err != nil {
				t.Skipf("%s: %v", c.name, err)
			}
			begin := time.Now()
			sess := startBoxOn(t, c.r, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
			took := time.Since(begin)
			for range runscExecs {
				begin = time.Now()
				execTrue(t, sess)
				if round > 0 { // the first round writes the shared root
					exec[c.name] = append(exec[c.name], time.Since(begin))
				}
			}
			if round > 0 {
				start[c.name] = append(start[c.name], took)
			}
			if err := sess.Close(); err != nil {
				t.Errorf("closing the %s box: %v", c.name, err)
			}
		}
	}
	for _, c := range configs {
		t.Logf("%s: start p50 %v p99 %v (n=%d); exec true p50 %v p99 %v (n=%d)", c.name,
			quantile(start[c.name], 0.5), quantile(start[c.name], 0.99), len(start[c.name]),
			quantile(exec[c.name], 0.5), quantile(exec[c.name], 0.99), len(exec[c.name]))
	}
}

// execTrue runs true in sess.
func execTrue(t *testing.T, sess *agent.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"true"}}, agent.IO{})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec true = %+v, %v", r, err)
	}
}
