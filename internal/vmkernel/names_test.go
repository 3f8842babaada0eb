package vmkernel

import (
	"strings"
	"testing"
)

// TestNames: the hand-written checks accept exactly what the regexps
// they replaced did (^[0-9a-f]{64}$ and ^[A-Za-z0-9.+~:-]{1,64}$).
func TestNames(t *testing.T) {
	hex := strings.Repeat("0a", 32)
	tests := []struct {
		s               string
		hexKey, version bool
	}{
		{hex, true, true},
		{strings.ToUpper(hex), false, true},
		{hex[:63], false, true},
		{hex + "0", false, false},
		{"6.1.172-1", false, true},
		{"1:6.1.172-1+deb12u1~bpo", false, true},
		{"", false, false},
		{"6.1 172", false, false},
		{"6.1/172", false, false},
		{"6.1.172-1é", false, false},
	}
	for _, tt := range tests {
		if got := isHexKey(tt.s); got != tt.hexKey {
			t.Errorf("isHexKey(%q) = %v, want %v", tt.s, got, tt.hexKey)
		}
		if got := isSourceVersion(tt.s); got != tt.version {
			t.Errorf("isSourceVersion(%q) = %v, want %v", tt.s, got, tt.version)
		}
	}
}
