package vmguest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

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

// TestSetAgentEnv: the agent, which becomes the box's agent without an
// exec, drops the environment the kernel gave the init (HOME, TERM, any
// unknown kernel parameter) for exactly agentEnv, which its processes
// inherit where a request names none.
func TestSetAgentEnv(t *testing.T) {
	saved := os.Environ()
	t.Cleanup(func() {
		os.Clearenv()
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			if err := os.Setenv(k, v); err != nil {
				t.Error(err)
			}
		}
	})
	t.Setenv("TERM", "linux")
	t.Setenv("noisy_param", "1")
	if err := setAgentEnv(); err != nil {
		t.Fatal(err)
	}
	got, want := os.Environ(), slices.Clone(agentEnv)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("environment = %q, want %q", got, want)
	}
}
