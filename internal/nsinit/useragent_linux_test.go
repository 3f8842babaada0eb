package nsinit

import "testing"

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
