package nsinit

import "testing"

// TestLimitsSessionIPC checks which inits set the session IPC sysctls: a
// rootless init is not root over its IPC namespace and would fail the
// write, ending every rootless session at start (review vmfix S1).
func TestLimitsSessionIPC(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want bool
	}{
		{"rootful session", Config{Session: true}, true},
		{"rootless session", Config{Session: true, Rootless: true}, false},
		{"rootful run", Config{}, false},
		{"rootless run", Config{Rootless: true}, false},
	}
	for _, tt := range tests {
		if got := limitsSessionIPC(&tt.cfg); got != tt.want {
			t.Errorf("%s: limitsSessionIPC = %v, want %v", tt.name, got, tt.want)
		}
	}
}
