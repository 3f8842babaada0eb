package boxname

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
		"tmp-" + dead + "-x":           false,
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
