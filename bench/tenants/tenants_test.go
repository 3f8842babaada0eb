package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	help := "Usage:\n  warden serve [flags]\n\nFlags:\n      --api-key-file string   file of API keys\n" +
		"  -h, --help                  help for serve\n      --max-sessions-per-key int   sessions per key\n"
	got := parseFlags(help)
	for _, want := range []string{"api-key-file", "help", "max-sessions-per-key"} {
		if !got[want] {
			t.Errorf("parseFlags: %q missing from %v", want, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("parseFlags: got %v, want 3 flags", got)
	}
}

// picked is the names that wants picks, in order.
func picked(names []string, wants func(string) bool) []string {
	var got []string
	for _, n := range names {
		if wants(n) {
			got = append(got, n)
		}
	}
	return got
}

func TestWantsAttack(t *testing.T) {
	names := []string{"1a slow", "1b slow", "2 flood", "8 loris"}
	for _, tc := range []struct {
		attacks string
		want    []string
	}{
		{"", names},
		{"1", []string{"1a slow", "1b slow"}},
		{"1b, 8", []string{"1b slow", "8 loris"}},
		{"9", nil},
	} {
		o := options{attacks: tc.attacks}
		if got := picked(names, o.wantsAttack); !slices.Equal(got, tc.want) {
			t.Errorf("wantsAttack(%q): got %v, want %v", tc.attacks, got, tc.want)
		}
	}
}

func TestWantsPattern(t *testing.T) {
	names := []string{"yes flood", "refused egress connections", execLoopPattern}
	for _, tc := range []struct {
		patterns string
		want     []string
	}{
		{"", names},
		{"egress", []string{"refused egress connections"}},
		{"Client Loop, yes", []string{"yes flood", execLoopPattern}},
		{"fork", nil},
	} {
		o := options{patterns: tc.patterns}
		if got := picked(names, o.wantsPattern); !slices.Equal(got, tc.want) {
			t.Errorf("wantsPattern(%q): got %v, want %v", tc.patterns, got, tc.want)
		}
	}
}

func TestSpent(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after map[string]float64
		want          float64
	}{
		{"growth", map[string]float64{"a": 1, "b": 2}, map[string]float64{"a": 1.5, "b": 2.25}, 0.75},
		{"new thread counts from zero", map[string]float64{"a": 1}, map[string]float64{"a": 1, "c": 0.5}, 0.5},
		{"gone thread counts nothing", map[string]float64{"a": 1, "b": 9}, map[string]float64{"a": 2}, 1},
	} {
		if got := spent(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: spent = %g, want %g", tc.name, got, tc.want)
		}
	}
}

// TestCommandLine: a report's command holds every flag as it was given,
// quoted where a shell needs it, so a result file says how it was made.
func TestCommandLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "go run ./bench/tenants"},
		{[]string{"--warden", "/tmp/w", "--label", "after-1"}, "go run ./bench/tenants --warden /tmp/w --label after-1"},
		{[]string{"--parts", "host", "--patterns", "egress,client loop,spinner", "--cpu-secs", "20"},
			"go run ./bench/tenants --parts host --patterns 'egress,client loop,spinner' --cpu-secs 20"},
		{[]string{"--serve-flag=--exec-pace=0.2", "--label", "it's", "--out", ""},
			`go run ./bench/tenants --serve-flag=--exec-pace=0.2 --label 'it'\''s' --out ''`},
	}
	for _, tt := range tests {
		if got := commandLine(tt.args); got != tt.want {
			t.Errorf("commandLine(%q) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestCheckCPUSecs: a --cpu-secs given must be a positive, finite number
// of seconds; left out, anything goes to the default.
func TestCheckCPUSecs(t *testing.T) {
	tests := []struct {
		set  bool
		secs float64
		ok   bool
	}{
		{false, 0, true},
		{true, 20, true},
		{true, 0, false},
		{true, -5, false},
		{true, math.NaN(), false},
		{true, math.Inf(1), false},
	}
	for _, tt := range tests {
		err := checkCPUSecs(tt.set, tt.secs)
		if got := err == nil; got != tt.ok || (err != nil && !strings.Contains(err.Error(), "--cpu-secs")) {
			t.Errorf("checkCPUSecs(%v, %g) = %v, want ok %v (an error naming --cpu-secs)", tt.set, tt.secs, err, tt.ok)
		}
	}
}

// TestScoreHost: a row's excess is over the control at its mode and cpus
// only where that control ran (none: left empty, not measured against
// 0), and a row that is not comparable meets no target.
func TestScoreHost(t *testing.T) {
	rows := []CPURow{
		{Mode: "API", Pattern: controlPattern, CPUs: 1, QuotaS: 10, HostS: 0.1},
		{Mode: "API", Pattern: "yes flood", CPUs: 1, QuotaS: 10, HostS: 0.5},
		{Mode: "API", Pattern: "yes flood", CPUs: 0.1, QuotaS: 1, HostS: 0.05},
		{Mode: "API", Pattern: execLoopPattern, CPUs: 0.1, QuotaS: 1, HostS: 0.01, NotComparable: "burst never spent"},
	}
	scoreHost(rows)
	tests := []struct {
		excess string
		pass   bool
	}{{"0.000", true}, {"0.040", true}, {"", true}, {"", false}}
	for i, tt := range tests {
		excess := ""
		if rows[i].Excess != nil {
			excess = fmt.Sprintf("%.3f", *rows[i].Excess)
		}
		if excess != tt.excess || rows[i].Pass != tt.pass {
			t.Errorf("row %d (%s at %g): excess %q pass %v, want %q %v", i, rows[i].Pattern, rows[i].CPUs, excess, rows[i].Pass, tt.excess, tt.pass)
		}
	}
}
