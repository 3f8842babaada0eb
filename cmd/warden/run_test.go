package main

import (
	"strings"
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

// TestCheckExecutor: --executor takes auto, go or fast, and only the
// native backend has a choice.
func TestCheckExecutor(t *testing.T) {
	tests := []struct {
		backend, executor, wantErr string
	}{
		{"native", "auto", ""},
		{"native", "go", ""},
		{"native", "fast", ""},
		{"native", "rust", `executor "rust": want one of auto, go, fast`},
		{"gvisor", "auto", ""},
		{"gvisor", "go", "only --backend native has a choice of executor"},
	}
	for _, tt := range tests {
		o := &runOptions{backend: tt.backend, executor: tt.executor}
		err := o.checkExecutor()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("--backend %s --executor %s: %v, want no error", tt.backend, tt.executor, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("--backend %s --executor %s: %v, want an error containing %q", tt.backend, tt.executor, err, tt.wantErr)
		}
	}
}
