//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"
)

// TestChoose: --workloads takes letters of the harness's workloads and
// --concurrency replaces (e)'s N; anything else is refused with a line
// that names the flag and an example.
func TestChoose(t *testing.T) {
	tests := []struct {
		workloads, conc, out string
		want                 []int
		err                  string
	}{
		{allWorkloads, "", defaultOut, []int{1, 8, 32, 128}, ""},
		{"e", "128", "/tmp/burst", []int{128}, ""},
		{"ae", " 8, 128", "/tmp/burst", []int{8, 128}, ""},
		{"e", "128", defaultOut, nil, "--workloads \"e\" measures part of the set: give --out DIR too"},
		{"", "", "/tmp/burst", nil, "--workloads \"\": give letters among abcdefgh"},
		{"ez", "", "/tmp/burst", nil, "--workloads \"ez\""},
		{"e", "0", "/tmp/burst", nil, "--concurrency \"0\": give numbers from 1 to 1024"},
		{"e", "8,x", "/tmp/burst", nil, "--concurrency \"8,x\""},
		{"e", "2000", "/tmp/burst", nil, "--concurrency \"2000\""},
	}
	for _, tt := range tests {
		o := options{workloads: tt.workloads, out: tt.out}
		o.scale()
		err := o.choose(tt.conc)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("choose(%q, %q) = %v, want no error", tt.workloads, tt.conc, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("choose(%q, %q) = %v, want an error with %q", tt.workloads, tt.conc, err, tt.err)
		case tt.err == "" && !slices.Equal(o.concurrency, tt.want):
			t.Errorf("choose(%q, %q): concurrency %v, want %v", tt.workloads, tt.conc, o.concurrency, tt.want)
		}
	}
	if o := (options{workloads: "e"}); !o.has("e") || o.has("a") {
		t.Errorf("options{workloads: e}: has(e) %v, has(a) %v; want true, false", o.has("e"), o.has("a"))
	}
}
