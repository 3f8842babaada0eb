package nsinit

import "testing"

// TestForcesShmRemoval checks which inits set kernel.shm_rmid_forced: a
// rootless init is not root over its IPC namespace and would fail the
// write, ending every rootless session at start (review vmfix S1).
func TestForcesShmRemoval(t *testing.T) {
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
		if got := forcesShmRemoval(&tt.cfg); got != tt.want {
			t.Errorf("%s: forcesShmRemoval = %v, want %v", tt.name, got, tt.want)
		}
	}
}
