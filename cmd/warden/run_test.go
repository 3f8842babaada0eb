package main

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestOnePSuffices: a run keeps to one P only when no egress proxy runs
// in the process beside the output drains.
func TestOnePSuffices(t *testing.T) {
	tests := []struct {
		mode spec.NetMode
		want bool
	}{
		{spec.NetNone, true},
		{spec.NetProxy, false},
	}
	for _, tt := range tests {
		s := spec.Spec{Network: spec.NetworkPolicy{Mode: tt.mode}}
		if got := onePSuffices(s); got != tt.want {
			t.Errorf("onePSuffices(--net %s) = %v, want %v", tt.mode, got, tt.want)
		}
	}
}
