package vmkernel

import (
	"strings"
	"testing"
)

// TestParseTSCKHz: the first CPU's cpu MHz, only with the flags that make
// it the TSC's rate.
func TestParseTSCKHz(t *testing.T) {
	good := "processor\t: 0\ncpu MHz\t\t: 2300.000\nflags\t\t: fpu tsc constant_tsc nonstop_tsc hypervisor tsc_known_freq\n\nprocessor\t: 1\ncpu MHz\t\t: 1.000\n"
	tests := []struct {
		name, in string
		want     int
		err      string
	}{
		{"a VM host", good, 2300000, ""},
		{"fractional", strings.Replace(good, "2300.000", "2294.6084", 1), 2294608, ""},
		{"no known frequency", strings.Replace(good, " tsc_known_freq", "", 1), 0, "lack hypervisor, constant_tsc or tsc_known_freq"},
		{"no constant rate", strings.Replace(good, " constant_tsc", "", 1), 0, "constant_tsc"},
		{"bare metal, no hypervisor", strings.Replace(good, " hypervisor", "", 1), 0, "lack hypervisor"},
		{"clock readable (aperfmperf)", strings.Replace(good, " hypervisor", " hypervisor aperfmperf", 1), 0, "has aperfmperf"},
		{"no MHz", strings.Replace(good, "cpu MHz", "cpu kHz", 1), 0, `cpu MHz ""`},
		{"absurd MHz", strings.Replace(good, "2300.000", "1e9", 1), 0, `cpu MHz "1e9"`},
		{"flags of the second CPU only", "processor\t: 0\ncpu MHz\t\t: 2300.000\n\nflags\t\t: hypervisor constant_tsc tsc_known_freq\n", 0, "lack"},
	}
	for _, tt := range tests {
		got, err := parseTSCKHz([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: got %d, %v, want an error with %q", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %d, %v, want %d", tt.name, got, err, tt.want)
		}
	}
}
