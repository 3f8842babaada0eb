package main

import "testing"

// TestExecPace: --exec-pace 0 turns pacing off (a negative ExecPace),
// a fraction passes as it is, and a negative value is refused.
func TestExecPace(t *testing.T) {
	tests := []struct {
		flag    float64
		want    float64
		wantErr bool
	}{
		{0.1, 0.1, false},
		{0, -1, false},
		{2, 2, false},
		{-0.5, 0, true},
	}
	for _, tt := range tests {
		got, err := execPace(tt.flag)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("execPace(%g) = %g, %v; want %g, error %v", tt.flag, got, err, tt.want, tt.wantErr)
		}
	}
}
