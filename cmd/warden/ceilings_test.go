//go:build !slim

package main

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestCheckGivenLimits: warden mcp refuses a limit flag the operator gave
// above its ceiling, naming both flags and both fixes; a flag left at its
// default is not refused (Config.Fit lowers it).
func TestCheckGivenLimits(t *testing.T) {
	c := spec.Ceilings{MemoryBytes: 5 * spec.GiB, CPUs: 2}
	big := spec.DefaultLimits
	big.MemoryBytes = 100 * spec.GiB
	tests := []struct {
		name  string
		l     spec.Limits
		given []string
		want  string
	}{
		{"given above", big, []string{"memory"}, "--memory 100GiB is above --max-memory 5GiB: lower --memory or raise --max-memory (0: no ceiling)"},
		{"default above", big, nil, ""},
		{"given none", spec.Limits{CPUs: 0, MemoryBytes: spec.GiB}, []string{"cpus"}, "--cpus 0 (no limit) is above --max-cpus 2: lower --cpus or raise --max-cpus (0: no ceiling)"},
		{"given within", spec.DefaultLimits, []string{"memory", "cpus"}, ""},
	}
	for _, tt := range tests {
		given := func(flag string) bool {
			for _, g := range tt.given {
				if g == flag {
					return true
				}
			}
			return false
		}
		err := checkGivenLimits(tt.l, c, given)
		if got := errText(err); got != tt.want {
			t.Errorf("%s: checkGivenLimits() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
