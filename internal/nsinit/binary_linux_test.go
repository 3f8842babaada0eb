package nsinit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTrustedInit checks that an init anyone but its owner could replace
// is never started.
func TestTrustedInit(t *testing.T) {
	tests := []struct {
		name      string
		fileMode  os.FileMode
		dirMode   os.FileMode
		exists    bool
		wantTrust bool
	}{
		{"owner-only executable", 0o755, 0o755, true, true},
		{"group-writable file", 0o775, 0o755, true, false},
		{"world-writable file", 0o757, 0o755, true, false},
		{"not executable", 0o644, 0o755, true, false},
		{"world-writable directory", 0o755, 0o777, true, false},
		{"missing", 0, 0o755, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bin")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, InitName)
			if tt.exists {
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tt.fileMode); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, tt.dirMode); err != nil {
				t.Fatal(err)
			}
			if got := trustedInit(p); got != tt.wantTrust {
				t.Errorf("trustedInit(%s) = %v, want %v", tt.name, got, tt.wantTrust)
			}
		})
	}
}
