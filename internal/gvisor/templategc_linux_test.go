package gvisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRemoveTemplateRoots lays out a state directory: the roots of a
// stored template, of a removed one, and of a removed one a box's bundle
// still names, beside entries that are no roots. Only the removed,
// unused root goes.
func TestRemoveTemplateRoots(t *testing.T) {
	dir := t.TempDir()
	hex := func(c string) string { return strings.Repeat(c, 64) }
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	stored, gone, inUse := "img-"+hex("a")+"-0011aabb", "img-"+hex("b")+"-0011aabb", "img-"+hex("c")+"-0011aabb"
	for _, p := range []string{stored + "/usr", gone + "/usr", gone + "/etc", inUse + "/usr", "runsc", "box-x", "img-short-00", "tmp-1-img"} {
		mk(p)
	}
	cfg := `{"root":{"path":"` + filepath.Join(dir, inUse) + `","readonly":true}}`
	if err := os.WriteFile(filepath.Join(dir, "box-x", "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := func(d string) bool { return d == "sha256:"+hex("a") }
	unused, err := unusedRoots(dir, keep)
	if err != nil || !slices.Equal(unused, []string{filepath.Join(dir, gone)}) {
		t.Fatalf("unused: got %q, %v; want only %s", unused, err, gone)
	}
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
	want := []string{"box-x", stored, inUse, "img-short-00", "runsc", "tmp-1-img"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left: got %q, want %q", got, want)
	}
}
