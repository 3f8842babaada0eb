package gvisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveTemplateRoots lays out a state directory: the roots of a
// stored template, of a removed one, of a removed one a box's bundle
// still names, and of a removed one a box (of another store, starting)
// holds (its shared flock, rootfs.HoldImageTemplate) with no bundle yet,
// beside entries that are no roots. Only the removed, unused root goes.
func TestRemoveTemplateRoots(t *testing.T) {
	dir := t.TempDir()
	hex := func(c string) string { return strings.Repeat(c, 64) }
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	stored, gone, inUse := "img-"+hex("a")+"-0011aabb", "img-"+hex("b")+"-0011aabb", "img-"+hex("c")+"-0011aabb"
	held := "img-" + hex("d") + "-0011aabb"
	for _, p := range []string{stored + "/usr", gone + "/usr", gone + "/etc", inUse + "/usr", held + "/usr", "runsc", "box-x", "img-short-00", "tmp-1-img"} {
		mk(p)
	}
	f := holdShared(t, filepath.Join(dir, held))
	defer f.Close()
	cfg := `{"root":{"path":"` + filepath.Join(dir, inUse) + `","readonly":true}}`
	if err := os.WriteFile(filepath.Join(dir, "box-x", "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := func(d string) bool { return d == "sha256:"+hex("a") }
	removed, err := RemoveTemplateRoots(dir, keep)
	if err != nil || !slices.Equal(removed, []string{"sha256:" + hex("b")}) {
		t.Fatalf("removed: got %q, %v; want the digest of %s", removed, err, gone)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := []string{"box-x", stored, inUse, held, "img-short-00", "runsc", "tmp-1-img"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left: got %q, want %q", got, want)
	}
}

// holdShared takes a box's shared flock on the root dir, as
// rootfs.HoldImageTemplate does.
func holdShared(t *testing.T, dir string) *os.File {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return f
}
