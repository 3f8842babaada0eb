package template

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestFlattenNeverFollowsLowerSymlinks stacks a layer whose directory
// names are symlinks out of the root under one writing through those
// names: the upper directory replaces the link, and nothing lands outside.
func TestFlattenNeverFollowsLowerSymlinks(t *testing.T) {
	outside := t.TempDir()
	lower := testLayer(t, layerTar(t, symlink("escape", outside), symlink("rel", "../../../.."), file("keep", "k")))
	upper := testLayer(t, layerTar(t, dir("escape"), file("escape/owned", "x"), dir("rel"), file("rel/.wh.keep", ""), file("rel/owned", "y")))
	lp := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(testImage(t, lower, upper)); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Options{})
	info, err := s.Import(context.Background(), lp, "stack")
	if err != nil {
		t.Fatalf("importing: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("flattening wrote %d entries outside the root", len(ents))
	}
	for _, d := range []string{"escape", "rel"} {
		fi, err := os.Lstat(filepath.Join(info.Root, d))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: got %v, %v; want the upper layer's directory", d, fi, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(info.Root, "keep")); err != nil {
		t.Errorf("keep: a whiteout under a replaced link removed a file outside its directory: %v", err)
	}
}

// TestDeclaredSizes checks a manifest is refused before any download when
// its layers declare more than the cap, a negative size, or a layer count
// that its config contradicts.
func TestDeclaredSizes(t *testing.T) {
	s := openStore(t, Options{MaxBytes: 1000})
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	layers := func(sizes ...int64) []v1.Descriptor {
		var ds []v1.Descriptor
		for _, n := range sizes {
			ds = append(ds, v1.Descriptor{Size: n, Digest: h})
		}
		return ds
	}
	tests := []struct {
		name    string
		layers  []v1.Descriptor
		diffIDs int
		want    string
	}{
		{"within", layers(500, 500), 2, ""},
		{"over the cap", layers(500, 501), 2, "more than the per-pull cap"},
		{"overflow", layers(1<<62, 1<<62, 1<<62), 3, "more than the per-pull cap"},
		{"negative", layers(-1), 1, "negative size"},
		{"config disagrees", layers(1), 2, "lists 1 layers but its config 2"},
	}
	for _, tc := range tests {
		cfg := &v1.ConfigFile{}
		cfg.RootFS.DiffIDs = make([]v1.Hash, tc.diffIDs)
		err := s.newInstaller(nil).declared(&v1.Manifest{Layers: tc.layers}, cfg)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
