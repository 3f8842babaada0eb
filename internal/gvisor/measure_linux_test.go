package gvisor

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// measureRounds is how many starts each root gets in TestMeasureTemplateStart.
const measureRounds = 12

// TestMeasureTemplateStart compares what a box costs to start on a
// template with one on the host's root, in one run, alternating so load
// falls on both alike: each round starts a box, runs `true` in it and
// closes it. It asserts no timing (the host is shared); run it with
// WARDEN_MEASURE=1 and CGO_ENABLED=0.
func TestMeasureTemplateStart(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure a box's start on a template against the host's root")
	}
	requireRunsc(t)
	roots := map[string]spec.Root{"host": {}, "template": templateRoot(t, "minimal")}
	took := map[string][]time.Duration{}
	for i := range 2*measureRounds + 2 {
		name := []string{"host", "template"}[i%2]
		begin := time.Now()
		t.Run(name, func(t *testing.T) {
			sess := startBox(t, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: roots[name]})
			run(t, sess, "true")
		})
		if i >= 2 { // the first of each writes its shared root
			took[name] = append(took[name], time.Since(begin))
		}
	}
	h, tp := median(took["host"]), median(took["template"])
	t.Logf("start + exec true + close, median of %d each: host %v, template %v (%.2fx)", measureRounds, h, tp, float64(tp)/float64(h))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
