package microvm

import "testing"

func TestTSCkHz(t *testing.T) {
	tests := []struct {
		info string
		want int
		ok   bool
	}{
		{"processor\t: 0\ncpu MHz\t\t: 2300.000\n", 2300000, true},
		{"cpu MHz : 2593.906\ncpu MHz : 1200.000\n", 2593906, true},
		{"cpu MHz : fast\n", 0, false},
		{"cpu MHz : 1e9\n", 0, false},
		{"model name : x\n", 0, false},
	}
	for _, tt := range tests {
		got, err := tscKHzFromCPUInfo([]byte(tt.info))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("tscKHzFromCPUInfo(%q) = %d, %v; want %d, ok=%v", tt.info, got, err, tt.want, tt.ok)
		}
	}
}
