package vmguest

import "testing"

func TestHasField(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"console=hvc0 warden.vm=1 quiet\n", true},
		{"warden.vm=1", true},
		{"warden.vm=10", false},
		{"xwarden.vm=1", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := hasField(tt.line, CmdlineKey); got != tt.want {
			t.Errorf("hasField(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestIsGuestOnHost(t *testing.T) {
	if IsGuest([]string{"/init"}) {
		t.Error("a test process (not PID 1) was taken for a VM init")
	}
}
