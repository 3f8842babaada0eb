package spec

import (
	"runtime"
	"testing"
)

// TestQuotaCPUs: pacing follows the cores a sandbox can really get, so
// no quota and a quota above the host's cores both count as the host's.
func TestQuotaCPUs(t *testing.T) {
	host := float64(runtime.NumCPU())
	tests := []struct {
		cpus, want float64
	}{
		{0, host},
		{-1, host},
		{MinCPUs, MinCPUs},
		{host, host},
		{host + 1, host},
		{MaxCPUs, host},
	}
	for _, tt := range tests {
		if got := QuotaCPUs(tt.cpus); got != tt.want {
			t.Errorf("QuotaCPUs(%g) = %g; want %g", tt.cpus, got, tt.want)
		}
	}
}
