//go:build !slim

package template

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestFlattenNeverFollowsLowerSymlinks stacks a layer whose directory
// names are symlinks out of the root under one writing through those
// names: the upper directory replaces the link, and nothing lands outside.
func TestFlattenNeverFollowsLowerSymlinks(t *testing.T) {
	outside := t.TempDir()
	lower := testLayer(t, layerTar(t, symlink("escape", outside), symlink("rel", "../../../.."), file("keep", "k")))
	upper := testLayer(t, layerTar(t, dir("escape"), file("escape/owned", "x"), dir("rel"), file("rel/.wh.keep", ""), file("rel/owned", "y")))
	lp := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, lp, testImage(t, lower, upper))
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
	s := openStore(t, Options{MaxBytes: 10 << 20})
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
		config  int64 // the manifest's declared config size
		diffIDs int
		dup     bool // the config lists its first layer twice
		want    string
	}{
		{"within", layers(5<<20, 5<<20), 100, 2, false, ""},
		{"over the cap", layers(5<<20, 5<<20+1), 100, 2, false, "more than the per-pull cap"},
		{"overflow", layers(1<<62, 1<<62, 1<<62), 100, 3, false, "more than the per-pull cap"},
		{"negative", layers(-1), 100, 1, false, "negative size"},
		{"config disagrees", layers(1), 100, 2, false, "lists 1 layers but its config 2"},
		{"config over its cap", layers(1), maxConfig + 1, 1, false, "image config declares 8388609 bytes"},
		{"config over the pull cap", layers(1), 10<<20 + 1, 1, false, "image config declares"},
		{"config negative", layers(1), -1, 1, false, "image config declares -1 bytes"},
		{"too many layers", layers(make([]int64, maxLayers+1)...), 100, maxLayers + 1, false, "at most 128"},
		{"layer listed twice", layers(1, 1), 100, 2, true, "twice: refused"},
	}
	for _, tc := range tests {
		cfg := &v1.ConfigFile{}
		for i := range tc.diffIDs {
			cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)})
		}
		if tc.dup {
			cfg.RootFS.DiffIDs[1] = cfg.RootFS.DiffIDs[0]
		}
		m := &v1.Manifest{Layers: tc.layers, Config: v1.Descriptor{Size: tc.config}}
		in := s.newInstaller(context.Background(), nil)
		err := in.declaredManifest(m)
		if err == nil {
			err = in.declared(m, cfg)
		}
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestWhiteoutThenSymlink stacks a layer that deletes a lower directory
// (a whiteout) and puts a symlink at its name, as real images do (a
// directory moved under /usr and linked back), for names sorting before
// and after their ".wh." marker, one link pointing out of the root: each
// name ends up the layer's symlink, the lower files are gone, and
// nothing is written outside the root.
func TestWhiteoutThenSymlink(t *testing.T) {
	outside := t.TempDir()
	lower := testLayer(t, layerTar(t, dir("lib"), file("lib/old", "x"), dir(".cache"), file(".cache/old", "x"),
		dir("d"), dir("d/-x"), file("d/-x/old", "x"), dir("out"), file("out/old", "x")))
	tests := []struct {
		name, link string
		entries    []entry
	}{
		{"lib", "usr/lib", []entry{file(".wh.lib", ""), symlink("lib", "usr/lib")}},
		{".cache", "/tmp", []entry{file(".wh..cache", ""), symlink(".cache", "/tmp")}},
		{"d/-x", "y", []entry{dir("d"), symlink("d/-x", "y"), file("d/.wh.-x", "")}},
		{"out", outside, []entry{symlink("out", outside), file(".wh.out", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lp := filepath.Join(t.TempDir(), "layout")
			writeLayout(t, lp, testImage(t, lower, testLayer(t, layerTar(t, tt.entries...))))
			info, err := openStore(t, Options{}).Import(context.Background(), lp, "stack")
			if err != nil {
				t.Fatalf("importing: %v", err)
			}
			got, err := os.Readlink(filepath.Join(info.Root, tt.name))
			if err != nil || got != tt.link {
				t.Errorf("%s: got link %q, %v; want the upper layer's symlink to %q", tt.name, got, err, tt.link)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("importing wrote %d entries outside the root", len(ents))
			}
		})
	}
}

// TestWhiteoutThenSymlinkNotFollowed: once a layer has put a link where
// it deleted a directory, an entry below the link in the same layer is
// refused, and a later layer that makes the link's name a directory gets
// a directory of its own: neither writes through the link, outside the
// root.
func TestWhiteoutThenSymlinkNotFollowed(t *testing.T) {
	lower := testLayer(t, layerTar(t, dir("out"), file("out/old", "x")))
	tests := []struct {
		name    string
		layers  func(outside string) [][]entry
		wantErr bool
	}{
		{"an entry below the link, same layer", func(outside string) [][]entry {
			return [][]entry{{file(".wh.out", ""), symlink("out", outside), file("out/evil", "x")}}
		}, true},
		{"a directory below the link, same layer", func(outside string) [][]entry {
			return [][]entry{{file(".wh.out", ""), symlink("out", outside), dir("out/evil")}}
		}, true},
		{"a later layer makes the link a directory", func(outside string) [][]entry {
			return [][]entry{{file(".wh.out", ""), symlink("out", outside)}, {dir("out"), file("out/new", "x")}}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outside := t.TempDir()
			layers := []v1.Layer{lower}
			for _, es := range tt.layers(outside) {
				layers = append(layers, testLayer(t, layerTar(t, es...)))
			}
			lp := filepath.Join(t.TempDir(), "layout")
			writeLayout(t, lp, testImage(t, layers...))
			info, err := openStore(t, Options{}).Import(context.Background(), lp, "stack")
			if (err != nil) != tt.wantErr {
				t.Fatalf("importing: got %v, want an error: %v", err, tt.wantErr)
			}
			if err == nil {
				if fi, err := os.Lstat(filepath.Join(info.Root, "out", "new")); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("out/new: got %v, %v; want a file in a directory of the root", fi, err)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("importing wrote %d entries outside the root, through the link", len(ents))
			}
		})
	}
}
