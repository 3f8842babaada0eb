package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestHoldRootGone: a box locking a root gc renamed away (or that is not
// there) is told to write it again, and holds a root that stays.
func TestHoldRootGone(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "img-x")
	if _, err := holdRoot(root); !errors.Is(err, errRootGone) {
		t.Errorf("holding a missing root: got %v, want errRootGone", err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(root, filepath.Join(dir, "tmp-gc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if samePath(f, root) {
		t.Errorf("a root renamed away and written again: got the same directory, want another")
	}
	h, err := holdRoot(root)
	if err != nil {
		t.Fatalf("holding a root: %v", err)
	}
	h.Close()
}

// TestRemoveImageTemplates lays out a state directory: the roots of a
// stored template, of a removed one, of a removed one the backend says a
// box uses, and of a removed one a box holds (holdRoot), beside entries
// that are no roots. Only the removed, unused, unheld root goes.
func TestRemoveImageTemplates(t *testing.T) {
	dir := t.TempDir()
	hex := func(c string) string { return strings.Repeat(c, 64) }
	stored, gone, used, held := "img-"+hex("a")+"-0011aabb", "img-"+hex("b")+"-0011aabb", "img-"+hex("c")+"-0011aabb", "img-"+hex("d")+"-0011aabb"
	for _, p := range []string{stored + "/usr", gone + "/usr", gone + "/etc", used + "/usr", held + "/usr", "box-x", "img-short-00", "tmp-1-img"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f, err := holdRoot(filepath.Join(dir, held))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keep := func(d string) bool { return d == "sha256:"+hex("a") }
	removed, err := RemoveImageTemplates(dir, keep, map[string]bool{filepath.Join(dir, used): true})
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
	want := []string{"box-x", stored, used, held, "img-short-00", "tmp-1-img"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left: got %q, want %q", got, want)
	}
}

// TestHoldImageTemplateConcurrent: boxes starting at once in one Warden,
// on one digest or on several whose roots are not written yet, each get
// the root (no write removes another's half-written one), and nothing
// but the roots is left.
func TestHoldImageTemplateConcurrent(t *testing.T) {
	base, img := t.TempDir(), imageTree(t)
	digests := []string{testDigest, "sha256:" + strings.Repeat("e", 64)}
	const workers, rounds = 4, 5
	errs := make(chan error, workers*rounds*len(digests))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				d := digests[(w+r)%len(digests)]
				_, f, err := HoldImageTemplate(base, spec.Root{Template: "t", Dir: img, Digest: d})
				if err == nil {
					err = f.Close()
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent start: %v", err)
		}
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(digests) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in the state directory: %q, want the %d roots", names, len(digests))
	}
}
