package fontcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// walkDirTree is tree as it was written with filepath.WalkDir: the
// reference the raw listing must hash exactly as, so a list stored
// before keeps its key.
func (w *walker) walkDirTree(rel string) {
	_ = filepath.WalkDir(filepath.Join(w.root, rel), func(p string, d fs.DirEntry, err error) error {
		if w.seen >= maxEntries {
			return filepath.SkipAll
		}
		r, _ := filepath.Rel(w.root, p)
		if err != nil {
			w.add(r, nil, err)
			return nil
		}
		if d.IsDir() {
			w.entry(r)
		}
		return nil
	})
}

// treeKey hashes the font trees of root with tree or its reference.
func treeKey(root string, reference bool) (string, int) {
	w := &walker{h: sha256.New(), root: root, buf: make([]byte, direntBuf)}
	for _, t := range fontTrees {
		if reference {
			w.walkDirTree(t)
		} else {
			w.tree(t)
		}
	}
	return hex.EncodeToString(w.h.Sum(nil)), w.seen
}

// TestTreeAsWalkDir: the raw listing hashes what filepath.WalkDir did,
// in the same order, for trees with nested directories, files, links to
// directories (not followed), a font tree that is a link or missing, one
// past maxEntries, and the host's own.
func TestTreeAsWalkDir(t *testing.T) {
	nested := func(root string) {
		for _, d := range []string{"truetype/dejavu", "truetype/b", "Type1", "opentype/x/y/z"} {
			must(t, os.MkdirAll(filepath.Join(root, "usr/share/fonts", d), 0o755))
			write(t, root, filepath.Join("usr/share/fonts", d, "f.ttf"), "x")
		}
		must(t, os.Symlink("truetype", filepath.Join(root, "usr/share/fonts/link")))
	}
	tests := []struct {
		name string
		make func(root string)
	}{
		{"empty root", func(string) {}},
		{"nested", nested},
		{"a font tree that is a link", func(root string) {
			nested(root)
			must(t, os.MkdirAll(filepath.Join(root, "usr/local/share"), 0o755))
			must(t, os.Symlink("../../share/fonts", filepath.Join(root, "usr/local/share/fonts")))
		}},
		{"past maxEntries", func(root string) {
			for i := range maxEntries + 10 {
				must(t, os.MkdirAll(filepath.Join(root, "usr/share/fonts", "d", fmt.Sprintf("%c%04d", 'a'+i%26, i)), 0o755))
			}
			must(t, os.MkdirAll(filepath.Join(root, "usr/local/share/fonts/later"), 0o755))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.make(root)
			got, gotSeen := treeKey(root, false)
			want, wantSeen := treeKey(root, true)
			if got != want || gotSeen != wantSeen {
				t.Errorf("tree: key %s over %d entries; WalkDir's %s over %d", got, gotSeen, want, wantSeen)
			}
		})
	}
	if got, want := must2(treeKey("/", false)), must2(treeKey("/", true)); got != want {
		t.Errorf("tree of the host's root: %s, WalkDir's %s", got, want)
	}
}

func must2(s string, _ int) string { return s }
