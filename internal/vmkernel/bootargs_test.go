package vmkernel

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestBootArgs: the timing arguments only with a TSC frequency, lpj
// from it and HZ; the CPU mitigations and the timer checks off only
// under TCG.
func TestBootArgs(t *testing.T) {
	tests := []struct {
		khz  int
		tcg  bool
		want []string
	}{
		{0, false, []string{"reboot=t"}},
		{0, true, []string{"reboot=t", "mitigations=off", "no_timer_check", "noapictimer"}},
		{2300000, true, []string{"reboot=t", "mitigations=off", "no_timer_check", "noapictimer", "tsc_early_khz=2300000", "lpj=23000000", "tsc=reliable"}},
		{2300000, false, []string{"reboot=t", "tsc_early_khz=2300000", "lpj=23000000", "tsc=reliable"}},
	}
	for _, tt := range tests {
		if got := BootArgs(tt.khz, tt.tcg); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("BootArgs(%d, %v): got %q, want %q", tt.khz, tt.tcg, got, tt.want)
		}
	}
}

// TestTCGOnlyArgs: the list the launcher refuses under KVM is exactly
// what BootArgs adds under TCG, and callers get copies.
func TestTCGOnlyArgs(t *testing.T) {
	tcg, kvm := BootArgs(2300000, true), BootArgs(2300000, false)
	var added []string
	for _, a := range tcg {
		if !slices.Contains(kvm, a) {
			added = append(added, a)
		}
	}
	if got := TCGOnlyArgs(); !reflect.DeepEqual(got, added) {
		t.Errorf("TCGOnlyArgs() = %q, want what BootArgs adds under TCG, %q", got, added)
	}
	TCGOnlyArgs()[0] = "changed"
	if got := TCGOnlyArgs()[0]; got == "changed" {
		t.Errorf("TCGOnlyArgs()[0] = %q after a caller changed its copy, want the list unchanged", got)
	}
}

// TestHZMatchesFragment: lpj= is right only if HZ is the kernel's.
func TestHZMatchesFragment(t *testing.T) {
	if want := fmt.Sprintf("\nCONFIG_HZ_%d=y\n", HZ); !strings.Contains(string(fragment), want) {
		t.Fatalf("config.fragment: got no %q, want the HZ of vmkernel.HZ", strings.TrimSpace(want))
	}
}

// TestMaxCPUsMatchesFragment: the launcher's vCPU limit is the kernel's.
func TestMaxCPUsMatchesFragment(t *testing.T) {
	if want := fmt.Sprintf("\nCONFIG_NR_CPUS=%d\n", MaxCPUs); !strings.Contains(string(fragment), want) {
		t.Fatalf("config.fragment: got no %q, want the NR_CPUS of vmkernel.MaxCPUs", strings.TrimSpace(want))
	}
}
