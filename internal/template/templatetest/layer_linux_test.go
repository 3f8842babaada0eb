package templatetest

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// layerNames lists the entries of gzip layer file p as "name" or
// "name -> link" for hard links.
func layerNames(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeLink {
			names = append(names, h.Name+" -> "+h.Linkname)
			continue
		}
		names = append(names, h.Name)
	}
}

// mkTree writes files (path: content) under a new directory.
func mkTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestWriteLayer checks the base layer holds the whole tree (a hard link
// once, apt's lists never) and the diff layer only what changed, with a
// whiteout for what went away.
func TestWriteLayer(t *testing.T) {
	lower := mkTree(t, map[string]string{"etc/a": "1", "etc/gone": "x", "usr/same": "s", "var/lib/apt/lists/big": "l"})
	if err := os.Link(filepath.Join(lower, "usr/same"), filepath.Join(lower, "usr/same2")); err != nil {
		t.Fatal(err)
	}
	upper := mkTree(t, map[string]string{"etc/a": "2", "usr/same": "s", "usr/new/f": "n", "var/lib/apt/lists/other": "l"})
	if err := os.Link(filepath.Join(upper, "usr/same"), filepath.Join(upper, "usr/same2")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, upper, lower string
		want               []string
	}{
		{"base", lower, "", []string{"etc/", "etc/a", "etc/gone", "usr/", "usr/same", "usr/same2 -> usr/same", "var/", "var/lib/", "var/lib/apt/", "var/lib/apt/lists/"}},
		{"diff", upper, lower, []string{"etc/a", "etc/.wh.gone", "usr/new/", "usr/new/f"}},
	} {
		out := filepath.Join(t.TempDir(), "l.tar.gz")
		if err := writeLayer(out, tc.upper, tc.lower); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := layerNames(t, out); !slices.Equal(got, tc.want) {
			t.Errorf("%s layer:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
