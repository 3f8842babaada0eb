package agent

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestViewCPUsFromTheQuota: the CPUs a sandbox is shown come from its
// quota alone, never from Warden's own affinity (0: the init shows its own).
func TestViewCPUsFromTheQuota(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want int
	}{
		{0, 0}, {1, 1}, {2.5, 3}, {4096, 4096},
	} {
		if got := View(spec.Limits{CPUs: c.cpus}).CPUs; got != c.want {
			t.Errorf("View(--cpus %g).CPUs = %d, want %d", c.cpus, got, c.want)
		}
	}
}
