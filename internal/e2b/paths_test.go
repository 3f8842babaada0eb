package e2b

import (
	"strings"
	"testing"
)

// TestBoxPath: /home/user is /workspace at the boundary, relative paths
// are from it, and what no file can be named is refused.
func TestBoxPath(t *testing.T) {
	tests := []struct {
		in, want string
		fails    bool
	}{
		{"", "/workspace", false},
		{".", "/workspace", false},
		{"a.txt", "/workspace/a.txt", false},
		{"dir/../b", "/workspace/b", false},
		{"/home/user", "/workspace", false},
		{"/home/user/", "/workspace", false},
		{"/home/user/x/y", "/workspace/x/y", false},
		{"/home/username", "/home/username", false},
		{"/home/user/../../etc/passwd", "/etc/passwd", false},
		{"../etc", "/etc", false},
		{"/tmp//x", "/tmp/x", false},
		{"/workspace/k", "/workspace/k", false},
		{"~", "/workspace", false},
		{"~/", "/workspace", false},
		{"~/x", "/workspace/x", false},
		{"~/../etc", "/etc", false},
		{`~\x`, `/workspace/\x`, false},
		{"~root/x", "", true},
		{"a/~/b", "/workspace/a/~/b", false},
		{"a\x00b", "", true},
		{strings.Repeat("a", maxPathBytes+1), "", true},
	}
	for _, tt := range tests {
		got, err := boxPath(tt.in)
		if (err != nil) != tt.fails || got != tt.want {
			t.Errorf("boxPath(%q) = %q, %v; want %q, failing %v", tt.in, got, err, tt.want, tt.fails)
		}
	}
}

// TestE2BPath: /workspace shows as /home/user, and nothing else changes.
func TestE2BPath(t *testing.T) {
	for in, want := range map[string]string{
		"/workspace":        "/home/user",
		"/workspace/a/b":    "/home/user/a/b",
		"/workspaces":       "/workspaces",
		"/tmp/x":            "/tmp/x",
		"/home/user/a":      "/home/user/a",
		"/home/sandbox/.rc": "/home/sandbox/.rc",
	} {
		if got := e2bPath(in); got != want {
			t.Errorf("e2bPath(%q) = %q, want %q", in, got, want)
		}
	}
}
