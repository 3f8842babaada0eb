package template

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlattenRefusesDotWhiteouts plants whiteouts of "." and ".." in a
// stored layer (unpacking refuses them, so only a corrupt store has one):
// flattening refuses them and removes nothing above the whiteout.
func TestFlattenRefusesDotWhiteouts(t *testing.T) {
	for _, wh := range []string{".wh...", ".wh.."} {
		top := t.TempDir()
		lower := filepath.Join(top, "lower")
		upper := filepath.Join(top, "upper")
		for _, d := range []string{filepath.Join(lower, "a", "b"), filepath.Join(upper, "a", "b")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{filepath.Join(lower, "a", "keep"), filepath.Join(upper, "a", "b", wh)} {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dst := filepath.Join(top, "dst")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		err := flatten(context.Background(), dst, []string{lower, upper})
		if err == nil || !strings.Contains(err.Error(), "names no entry of its directory") {
			t.Errorf("%s: got %v, want the whiteout refused", wh, err)
		}
		if _, err := os.Lstat(filepath.Join(dst, "a", "keep")); err != nil {
			t.Errorf("%s: a/keep removed by a whiteout in a/b: %v", wh, err)
		}
	}
}

// TestFlattenStopsOnCancel checks flattening gives up once its context
// ends instead of finishing the walk under the store's lock.
func TestFlattenStopsOnCancel(t *testing.T) {
	top := t.TempDir()
	layer := filepath.Join(top, "layer")
	if err := os.MkdirAll(filepath.Join(layer, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(top, "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := flatten(ctx, dst, []string{layer}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
