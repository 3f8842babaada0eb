package spec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"0", 0, ""},
		{"1048576", 1 << 20, ""},
		{"256MiB", 256 * MiB, ""},
		{"256mib", 256 * MiB, ""},
		{"64m", 64 * MiB, ""},
		{"1.5G", 3 * GiB / 2, ""},
		{"1GiB", GiB, ""},
		{"512K", 512 * KiB, ""},
		{"1MB", 1000 * 1000, ""},
		{"2kb", 2000, ""},
		{" 10 MiB ", 10 * MiB, ""},
		{"12b", 12, ""},
		{"", 0, "not a size"},
		{"abc", 0, "not a size"},
		{"10XB", 0, "not a size"},
		{"-1M", 0, "not a size"},
		{"1.2.3M", 0, "not a size"},
		{"99999999TiB", 0, "too large"},
		{"0.5", 0, "not a whole number"},
		{"0.9b", 0, "not a whole number"},
		{"0.5KiB", 512, ""},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSize(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0B"},
		{512, "512B"},
		{KiB, "1KiB"},
		{256 * MiB, "256MiB"},
		{3 * GiB / 2, "1.5GiB"},
		{MiB + 1, "1048577B"},
	}
	for _, tt := range tests {
		if got := FormatSize(tt.in); got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"10s", 10 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"0", 0, ""},
		{"10", 0, "has no unit"},
		{"1.5", 0, "has no unit"},
		{"ten", 0, "not a duration"},
		{"-5s", 0, "negative"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDuration(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestValidateErrorsAreInvalid(t *testing.T) {
	s := Spec{Limits: DefaultLimits, Network: NetworkPolicy{Mode: NetNone}}
	if err := s.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate() of a spec without a command = %v, want ErrInvalid", err)
	}
}
