package main

import "testing"

// TestRow checks a start row's wall and CPU ratios divide by the host's
// medians on the same backend, and a root without samples or a skipped
// one says so rather than dividing by zero.
func TestRow(t *testing.T) {
	host := &contender{samples: []float64{100, 200, 300}, cpu: []float64{50, 50, 60}}
	tests := []struct {
		name string
		c    *contender
		base *contender
		want string
	}{
		{"template", &contender{template: "minimal", samples: []float64{110, 220, 330}, cpu: []float64{55, 55, 66}}, host,
			"| native | minimal | 220.0 | 330.0 | 1.10x | 55.0 | 66.0 | 1.10x | 0 |"},
		{"host itself", host, host, "| native | host | 200.0 | 300.0 | 1.00x | 50.0 | 60.0 | 1.00x | 0 |"},
		{"host without samples", &contender{template: "minimal", samples: []float64{1}, cpu: []float64{1}}, &contender{},
			"| native | minimal | 1.0 | 1.0 | - | 1.0 | 1.0 | - | 0 |"},
		{"skipped", &contender{template: "datasci", skipped: "ran on\nthe host"}, host,
			"| native | datasci | skipped: ran on the host | | | | | | |"},
	}
	for _, tt := range tests {
		if got := tt.c.row("native", tt.base); got != tt.want {
			t.Errorf("%s: row = %q, want %q", tt.name, got, tt.want)
		}
	}
}
