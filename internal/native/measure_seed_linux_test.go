package native

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestMeasureSeededStart logs what the init's copy of a template's home
// costs a start (WARDEN_MEASURE=1): warden run's `true` on the minimal
// image, and on it committed with a home of 10 and of 1000 small files,
// alternated, 15 rounds after one warm-up; medians and their ratio to the
// base's in the same run.
func TestMeasureSeededStart(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure")
	}
	testhost.RequireRoot(t)
	st, base := templatetest.ImportNew(t, "minimal")
	roots := []spec.Root{base, templatetest.CommitFiles(t, st, "minimal", "files10", 10), templatetest.CommitFiles(t, st, "minimal", "files1000", 1000)}
	times := make([][]time.Duration, len(roots))
	for round := range 16 {
		for i, root := range roots {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			start := time.Now()
			r, err := Runtime{}.Run(ctx, spec.Spec{Command: []string{"true"}, Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root}, IO{})
			took := time.Since(start)
			cancel()
			if err != nil || r.ExitCode != 0 {
				t.Fatalf("run on %s: %v, %+v", root.Template, err, r)
			}
			if round > 0 {
				times[i] = append(times[i], took)
			}
		}
	}
	baseMedian := medianOf(times[0])
	for i, root := range roots {
		m := medianOf(times[i])
		t.Logf("%s: median start %v, %.3fx the base's", root.Template, m, float64(m)/float64(baseMedian))
	}
}

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
