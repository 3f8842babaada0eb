package fontcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const goodList = `{"_version": 330, "ttflist": []}`

// write makes a file at root/rel, with its parents.
func write(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadResult: a build's font list is read back only when it is one
// regular file of a font list's name, reached through no link, at most
// MaxBytes, whose _version is its name's; anything else is refused
// (a fifo without blocking), and a HOME without one is no list.
func TestReadResult(t *testing.T) {
	list := filepath.Join(Dir, "fontlist-v330.json")
	cases := []struct {
		name    string
		make    func(t *testing.T, home string)
		want    string // the File's name; "" for none
		wantErr string
	}{
		{"good", func(t *testing.T, h string) { write(t, h, list, goodList) }, "fontlist-v330.json", ""},
		{"no cache dir", func(t *testing.T, h string) {}, "", ""},
		{"empty cache dir", func(t *testing.T, h string) { write(t, h, Dir+"/other", "x") }, "", ""},
		{"link", func(t *testing.T, h string) {
			write(t, h, "real.json", goodList)
			must(t, os.MkdirAll(filepath.Join(h, Dir), 0o755))
			must(t, os.Symlink("../../real.json", filepath.Join(h, list)))
		}, "", "opening"},
		{"linked directory", func(t *testing.T, h string) {
			write(t, h, "elsewhere/fontlist-v330.json", goodList)
			must(t, os.MkdirAll(filepath.Join(h, ".cache"), 0o755))
			must(t, os.Symlink("../elsewhere", filepath.Join(h, Dir)))
		}, "", "opening"},
		{"fifo", func(t *testing.T, h string) {
			must(t, os.MkdirAll(filepath.Join(h, Dir), 0o755))
			if err := unix.Mkfifo(filepath.Join(h, list), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "", "not a regular file"},
		{"directory", func(t *testing.T, h string) { must(t, os.MkdirAll(filepath.Join(h, list), 0o755)) }, "", "not a regular file"},
		{"huge", func(t *testing.T, h string) {
			write(t, h, list, `{"_version": 330, "x": "`+strings.Repeat("x", MaxBytes)+`"}`)
		}, "", "over"},
		{"two lists", func(t *testing.T, h string) {
			write(t, h, list, goodList)
			write(t, h, Dir+"/fontlist-v331.json", `{"_version": 331}`)
		}, "", "2 font lists"},
		{"version not the name's", func(t *testing.T, h string) { write(t, h, list, `{"_version": 331}`) }, "", "not its name's"},
		{"not JSON", func(t *testing.T, h string) { write(t, h, list, "<html>") }, "", "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			c.make(t, home)
			done := make(chan struct{})
			var f File
			var err error
			go func() { defer close(done); f, err = ReadResult(home) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("ReadResult blocked")
			}
			switch {
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("err = %v, want one containing %q", err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case f.Name != c.want:
				t.Errorf("got list %q, want %q", f.Name, c.want)
			}
		})
	}
}

// fakeRoot makes a root tree with Debian's matplotlib and fonts in it.
func fakeRoot(t *testing.T) string {
	root := t.TempDir()
	write(t, root, "usr/lib/python3/dist-packages/matplotlib/font_manager.py", "x")
	write(t, root, "usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "x")
	write(t, root, "etc/fonts/fonts.conf", "<fontconfig/>")
	return root
}

// TestRootKey: a root without matplotlib has no list; the key is stable
// while nothing changes, and changes with a font added deep in a font
// tree, fontconfig's configuration edited in place, or matplotlib
// replaced.
func TestRootKey(t *testing.T) {
	if k, err := RootKey(t.TempDir()); err != nil || !k.None {
		t.Errorf("RootKey(a root without matplotlib) = %+v, %v; want None", k, err)
	}
	root := fakeRoot(t)
	base, err := RootKey(root)
	if err != nil || base.None || len(base.Sum) != 64 {
		t.Fatalf("RootKey = %+v, %v; want a digest", base, err)
	}
	if again, _ := RootKey(root); again != base {
		t.Errorf("RootKey twice: %v then %v", base, again)
	}
	changes := []struct {
		name string
		fn   func()
	}{
		{"font added", func() { write(t, root, "usr/share/fonts/truetype/dejavu/New.ttf", "x") }},
		{"fonts.conf edited", func() {
			later := time.Now().Add(time.Hour)
			must(t, os.Chtimes(filepath.Join(root, "etc/fonts/fonts.conf"), later, later))
		}},
		{"pip's matplotlib", func() { write(t, root, "usr/local/lib/python3.11/dist-packages/matplotlib/font_manager.py", "x") }},
	}
	prev := base
	for _, c := range changes {
		c.fn()
		k, err := RootKey(root)
		if err != nil || k == prev {
			t.Errorf("after %s: RootKey = %v, %v; want a new key", c.name, k, err)
		}
		prev = k
	}
}

// TestStore: a saved list loads back whole, the "no list" answer too; a
// damaged record is no record; a hostile list is not saved; a store
// anyone else may write is refused; one build holds the lock at a time.
func TestStore(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "fonts")}
	k := Key{Sum: strings.Repeat("a", 64)}
	if _, found, err := s.Load(k); found || err != nil {
		t.Errorf("Load from a missing store: found %v, %v", found, err)
	}
	want := File{Name: "fontlist-v330.json", Data: []byte(goodList)}
	if err := s.Save(k, want); err != nil {
		t.Fatal(err)
	}
	got, found, err := s.Load(k)
	if err != nil || !found || got.Name != want.Name || string(got.Data) != goodList {
		t.Errorf("Load = %q %q, %v, %v; want the saved list", got.Name, got.Data, found, err)
	}
	none := Key{Sum: strings.Repeat("b", 64)}
	if err := s.Save(none, File{}); err != nil {
		t.Fatal(err)
	}
	if got, found, err := s.Load(none); err != nil || !found || !got.None() {
		t.Errorf("Load(none) = %+v, %v, %v; want the none answer", got, found, err)
	}
	if _, found, _ := s.Load(k); found {
		t.Error("the record of an older key is still there after another was saved")
	}
	if err := s.Save(k, want); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(k, File{Name: "../x", Data: []byte(goodList)}); err == nil {
		t.Error("Save of a list named ../x: no error")
	}
	if err := os.WriteFile(filepath.Join(s.Dir, k.Sum), []byte("WFONT1\nfontlist-v330"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Load(k); found || err != nil {
		t.Errorf("Load of a damaged record: found %v, %v; want not found", found, err)
	}
	lock, held, err := s.TryLock()
	if err != nil || !held {
		t.Fatalf("TryLock = %v, %v", held, err)
	}
	if _, again, err := s.TryLock(); again || err != nil {
		t.Errorf("TryLock while held = %v, %v; want not held", again, err)
	}
	lock.Close()
	if err := os.Chmod(s.Dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(k); err == nil || !strings.Contains(err.Error(), "writable by it alone") {
		t.Errorf("Load from a store anyone may write: %v", err)
	}
}

// must fails the test on err, for a fixture's set-up.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
