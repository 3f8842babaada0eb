//go:build !slim

package main

import (
	"strings"
	"testing"
)

// TestCheckKeys: warden serve refuses bad keys before it starts anything,
// by the server's own rules, and says where keys come from.
func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name              string
		keys, metricsKeys []string
		want              string // "" means accepted
	}{
		{"no keys", nil, nil, ""},
		{"API keys", []string{"k1"}, nil, ""},
		{"both", []string{"k1"}, []string{"m1"}, ""},
		{"metrics keys alone", nil, []string{"m1"}, "MetricsKeys without Keys"},
		{"one key in both", []string{"k1"}, []string{"k1"}, "both an API key and a metrics key"},
	}
	for _, tt := range tests {
		err := checkKeys(tt.keys, tt.metricsKeys)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tt.want == "" && got != "" || tt.want != "" && (!strings.Contains(got, tt.want) || !strings.Contains(got, "--metrics-key-file")) {
			t.Errorf("%s: checkKeys = %q, want %q naming --metrics-key-file", tt.name, got, tt.want)
		}
	}
}
