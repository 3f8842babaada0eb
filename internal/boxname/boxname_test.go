package boxname

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestOwnerPID: only names that start with a positive decimal pid and a
// dash are Warden's; the sweeps leave every other name alone.
func TestOwnerPID(t *testing.T) {
	tests := []struct {
		name   string
		want   int
		wantOK bool
	}{
		{"123-abc", 123, true},
		{"1-x", 1, true},
		{"123", 0, false},
		{"123-", 0, false},
		{"-123-x", 0, false},
		{"+12-x", 0, false},
		{"0-x", 0, false},
		{"012-x", 0, false},
		{"abc-x", 0, false},
		{"99999999999999999999999-x", 0, false},
	}
	for _, tt := range tests {
		got, ok := OwnerPID(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("OwnerPID(%q) = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestNewOwned: New names carry this process's pid, differ each time,
// and neither this process nor a pid <= 0 is ever Dead.
func TestNewOwned(t *testing.T) {
	a, b := New(), New()
	if a == b {
		t.Errorf("New returned %q twice", a)
	}
	if pid, ok := OwnerPID(a); !ok || pid != os.Getpid() {
		t.Errorf("OwnerPID(New() = %q) = %d, %v; want %d, true", a, pid, ok, os.Getpid())
	}
	if !strings.HasPrefix(Box(), Prefix+strconv.Itoa(os.Getpid())+"-") {
		t.Errorf("Box() = %q, want %s<pid>-...", Box(), Prefix)
	}
	for _, pid := range []int{os.Getpid(), 0, -1} {
		if Dead(pid) {
			t.Errorf("Dead(%d) = true, want false", pid)
		}
	}
}
