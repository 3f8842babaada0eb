package boxname

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestStaleDirs: a state directory's entries named after a dead Warden
// are stale, a live one's (this process's) and names Warden did not make
// are not, and RemoveDir removes what is listed.
func TestStaleDirs(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running true for a dead pid: %v", err)
	}
	dead, self := strconv.Itoa(cmd.Process.Pid), strconv.Itoa(os.Getpid())
	if Alive(cmd.Process.Pid) {
		t.Skipf("pid %s was reused already", dead)
	}
	dir := t.TempDir()
	names := map[string]bool{
		"box-" + Prefix + dead + "-ab": true,
		"tmp-" + dead:                  true,
		"template-" + dead:             true,
		"box-" + Prefix + self + "-ab": false,
		"tmp-" + self:                  false,
		"box-other-" + dead + "-ab":    false,
		"notes":                        false,
		"tmp-0":                        false,
		"template-00":                  false,
		"box-" + Prefix + "0-x":        false,
		"tmp-+4194305":                 false,
		"tmp--1":                       false,
		"tmp-" + dead + "-img":         true,
		"tmp-" + dead + "-gc-img-ab-1": true,
		"tmp-" + self + "-img":         false,
		"tmp-" + self + "-gc-img-ab-1": false,
		"tmp-0-img":                    false,
		"tmp--1-img":                   false,
		"tmp-x" + dead + "-img":        false,
	}
	var want []string
	for name, stale := range names {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if stale {
			want = append(want, filepath.Join(dir, name))
		}
	}
	got := StaleDirs(dir)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("StaleDirs = %q, want %q", got, want)
	}
	for _, d := range got {
		if err := RemoveDir(d); err != nil {
			t.Errorf("RemoveDir(%q): %v", d, err)
		}
	}
	if got := StaleDirs(dir); len(got) != 0 {
		t.Errorf("after RemoveDir, StaleDirs = %q, want none", got)
	}
}

// TestDirOwner: the pid of a state directory entry is read up to the
// first "-" after its prefix, so the shared roots being written
// (tmp-<pid>-img) or removed (tmp-<pid>-gc-img-…) are a Warden's too.
func TestDirOwner(t *testing.T) {
	tests := []struct {
		name   string
		want   int
		wantOK bool
	}{
		{"tmp-12", 12, true},
		{"tmp-12-img", 12, true},
		{"tmp-12-gc-img-" + strings.Repeat("a", 64) + "-1f", 12, true},
		{"template-7", 7, true},
		{"template-7-x", 7, true},
		{"box-" + Prefix + "9-ab", 9, true},
		{"tmp-", 0, false},
		{"tmp--img", 0, false},
		{"tmp-0-img", 0, false},
		{"tmp-012-img", 0, false},
		{"tmp-+12-img", 0, false},
		{"tmp-x12-img", 0, false},
		{"img-12-x", 0, false},
		{"box-" + Prefix + "x-ab", 0, false},
	}
	for _, tt := range tests {
		got, ok := dirOwner(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("dirOwner(%q) = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}
