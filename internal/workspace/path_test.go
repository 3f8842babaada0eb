package workspace

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	long := strings.Repeat("a", maxNameBytes+1)
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: ".", want: "."},
		{in: "x", want: "x"},
		{in: "x/y", want: "x/y"},
		{in: "./x/./y", want: "x/y"},
		{in: "/workspace", want: "."},
		{in: "/workspace/x/y", want: "x/y"},
		{in: "/workspace/.", want: "."},
		{in: strings.Repeat("a", maxNameBytes), want: strings.Repeat("a", maxNameBytes)},
		{in: "", wantErr: true},
		{in: "..", wantErr: true},
		{in: "../x", wantErr: true},
		{in: "x/../y", wantErr: true},
		{in: "/workspace/../etc/passwd", wantErr: true},
		{in: "/etc/passwd", wantErr: true},
		{in: "/workspacex/y", wantErr: true},
		{in: "/", wantErr: true},
		{in: "x//y", wantErr: true},
		{in: "x/", wantErr: true},
		{in: "/workspace/", wantErr: true},
		{in: "x\x00y", wantErr: true},
		{in: long, wantErr: true},
		{in: strings.Repeat("a/", maxPathBytes/2) + "a", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parsePath(tt.in)
		if tt.wantErr {
			if !errors.Is(err, ErrBadPath) {
				t.Errorf("parsePath(%.40q) error = %v, want ErrBadPath", tt.in, err)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("parsePath(%.40q) error %q spans several lines", tt.in, err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("parsePath(%q) = %q, %v; want %q, nil", tt.in, got, err, tt.want)
		}
	}
}
