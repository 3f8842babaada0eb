package docker

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLeaseInitKeepsOneCopy leases the copies of two inits in turn: each
// lease finds its own copy, whole and executable, and the other gone.
func TestLeaseInitKeepsOneCopy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: initDir is a tmpfs under " + StateDir)
	}
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var srcs []string
	for _, name := range []string{"a", "b"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("init "+name), 0o755); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, p)
	}
	var prev string
	for _, src := range append(srcs, srcs[1]) {
		p, release, err := leaseInit(src)
		if err != nil {
			t.Fatalf("leaseInit(%s): %v", src, err)
		}
		got, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		want, _ := os.ReadFile(src)
		if err != nil || serr != nil || string(got) != string(want) || fi.Mode().Perm() != 0o555 {
			t.Errorf("copy of %s at %s: %q (mode %v, %v, %v), want %q mode 0555", src, p, got, fi.Mode(), err, serr, want)
		}
		if ents, _ := os.ReadDir(initDir); len(ents) != 1 {
			t.Errorf("after leasing %s, %s holds %d entries, want 1", src, initDir, len(ents))
		}
		if prev != "" && prev != p {
			if _, err := os.Stat(prev); !os.IsNotExist(err) {
				t.Errorf("the previous copy %s is still there (%v)", prev, err)
			}
		}
		if err := release(); err != nil {
			t.Errorf("release: %v", err)
		}
		prev = p
	}
}
