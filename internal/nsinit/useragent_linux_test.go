package nsinit

import (
	"strings"
	"testing"
)

// TestProcessLimit: where the user's agent runs as the sandbox user
// (HideAgent), RLIMIT_NPROC gets room for its threads, which count
// against it; no limit stays no limit.
func TestProcessLimit(t *testing.T) {
	tests := []struct {
		name  string
		procs uint64
		hide  bool
		want  uint64
	}{
		{"native box", 256, false, 256},
		{"gVisor box", 256, true, 256 + userAgentTasks},
		{"no limit", 0, true, 0},
	}
	for _, tt := range tests {
		cfg := &Config{Rlimits: Rlimits{Processes: tt.procs}, HideAgent: tt.hide}
		if got := processLimit(cfg); got != tt.want {
			t.Errorf("%s: processLimit(%d processes, HideAgent %v) = %d, want %d", tt.name, tt.procs, tt.hide, got, tt.want)
		}
	}
}

// TestUserAgentArgsRefused: the user's agent refuses arguments that do
// not say the sandbox user and the transport, before it changes
// anything (mounts, identity).
func TestUserAgentArgsRefused(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"none", nil},
		{"no transport, as before the stream", []string{"1000", "1000"}},
		{"unknown transport", []string{"1000", "1000", "pipe"}},
		{"one too many", []string{"1000", "1000", userAgentStream, "x"}},
		{"a bridge's pace without the stream", []string{"1000", "1000", userAgentFD, "1", "2"}},
		{"three too many", []string{"1000", "1000", userAgentStream, "1", "2", "3"}},
	}
	for _, tt := range tests {
		err := becomeUserAgent(tt.args)
		if err == nil || !strings.Contains(err.Error(), "want the user's uid, gid and transport (stream or fd)") {
			t.Errorf("%s: becomeUserAgent(%q) = %v, want the refusal naming what it wants", tt.name, tt.args, err)
		}
	}
}
