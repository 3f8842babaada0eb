package fontcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreAncestors: the store makes only its own directory and its
// parent, owner-only, and refuses one below a directory others may
// change (a sticky one of its owner's, as /tmp, passes).
func TestStoreAncestors(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the ancestors are checked against root's ownership of t.TempDir's")
	}
	base := t.TempDir()
	s := Store{Dir: filepath.Join(base, "cache", "fonts")}
	if _, _, err := s.TryLock(); err != nil {
		t.Fatalf("a store below the test's own directory: %v", err)
	}
	for _, d := range []string{filepath.Dir(s.Dir), s.Dir} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory of mode 0700", d, fi.Mode(), err)
		}
	}
	deep := Store{Dir: filepath.Join(base, "a", "b", "fonts")}
	if _, _, err := deep.TryLock(); err == nil {
		t.Errorf("TryLock made %s and its grandparent, want only it and its parent", deep.Dir)
	}
	for _, mode := range []os.FileMode{0o777, 0o770} {
		open := filepath.Join(base, "open")
		if err := os.MkdirAll(open, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(open, mode); err != nil {
			t.Fatal(err)
		}
		s := Store{Dir: filepath.Join(open, "warden", "fonts")}
		if _, _, err := s.TryLock(); err == nil || !strings.Contains(err.Error(), open) {
			t.Errorf("a store below a directory of mode %v: err = %v, want it refused, naming %s", mode, err, open)
		}
		if _, _, err := s.Load(Key{Sum: strings.Repeat("a", 64)}); err == nil {
			t.Errorf("Load of a store below a directory of mode %v: no error, want it refused", mode)
		}
	}
}

// TestStoreAttempts: a build attempt is remembered for RetryAfter (not
// one dated in the future), and a saved list clears it.
func TestStoreAttempts(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "fonts")}
	if err := s.makeDir(); err != nil {
		t.Fatal(err)
	}
	k := Key{Sum: strings.Repeat("b", 64)}
	if s.Attempted(k) {
		t.Fatal("Attempted before any attempt")
	}
	if err := s.MarkAttempt(k); err != nil {
		t.Fatal(err)
	}
	if !s.Attempted(k) {
		t.Error("not Attempted right after MarkAttempt")
	}
	mark := filepath.Join(s.Dir, k.Sum+attemptSuffix)
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{RetryAfter / 2, true}, {RetryAfter + time.Minute, false}, {-time.Hour, false}} {
		at := time.Now().Add(-c.age)
		if err := os.Chtimes(mark, at, at); err != nil {
			t.Fatal(err)
		}
		if got := s.Attempted(k); got != c.want {
			t.Errorf("an attempt %v ago: Attempted = %t, want %t", c.age, got, c.want)
		}
	}
	at := time.Now()
	if err := os.Chtimes(mark, at, at); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(k, File{}); err != nil {
		t.Fatal(err)
	}
	if s.Attempted(k) {
		t.Error("Attempted after the list was saved")
	}
}
