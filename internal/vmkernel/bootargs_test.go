package vmkernel

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestBootArgs: the timing arguments only with a TSC frequency, lpj
// from it and HZ.
func TestBootArgs(t *testing.T) {
	tests := []struct {
		khz  int
		want []string
	}{
		{0, []string{"reboot=t"}},
		{2300000, []string{"reboot=t", "tsc_early_khz=2300000", "lpj=23000000", "tsc=reliable"}},
	}
	for _, tt := range tests {
		if got := BootArgs(tt.khz); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("BootArgs(%d): got %q, want %q", tt.khz, got, tt.want)
		}
	}
}

// TestHZMatchesFragment: lpj= is right only if HZ is the kernel's.
func TestHZMatchesFragment(t *testing.T) {
	if want := fmt.Sprintf("\nCONFIG_HZ_%d=y\n", HZ); !strings.Contains(string(fragment), want) {
		t.Fatalf("config.fragment: got no %q, want the HZ of vmkernel.HZ", strings.TrimSpace(want))
	}
}
