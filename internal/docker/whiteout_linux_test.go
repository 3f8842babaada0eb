package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// TestPackWhiteoutsFirst packs a layer tree that deletes names and puts
// new entries at them: in each directory, the opaque marker and the
// whiteouts come before the other entries, whatever name order says
// (".cache" and "-x" sort before ".wh..cache" and ".wh.-x").
func TestPackWhiteoutsFirst(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "d"), 0o755))
	for _, f := range []string{".wh..cache", "d/.wh.-x", "d/.wh..wh..opq", "a"} {
		must(os.WriteFile(filepath.Join(dir, f), nil, 0o644))
	}
	must(os.Symlink("/tmp", filepath.Join(dir, ".cache")))
	must(os.Symlink("y", filepath.Join(dir, "d/-x")))
	var buf bytes.Buffer
	must(packTree(&buf, dir, true))
	var got []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got = append(got, h.Name)
	}
	want := []string{".wh..cache", ".cache", "a", "d/", "d/.wh..wh..opq", "d/.wh.-x", "d/-x"}
	if !slices.Equal(got, want) {
		t.Errorf("packed %q, want %q", got, want)
	}
}

// TestDockerWhiteoutThenSymlink loads into the live engine the images of
// templates whose top layer deletes a lower directory and puts a symlink
// at its name (template.TestWhiteoutThenSymlink's cases, which the store
// accepts): each loads, where packing in name order made the engine's
// overlay2 applier fail ("mknod ... file exists").
func TestDockerWhiteoutThenSymlink(t *testing.T) {
	liveEngine(t)
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	r := &Runtime{engine: e}
	outside := t.TempDir()
	lower := tarLayer(t, tdir("lib"), tfile("lib/old"), tdir(".cache"), tfile(".cache/old"),
		tdir("d"), tdir("d/-x"), tfile("d/-x/old"), tdir("out"), tfile("out/old"))
	tests := []struct {
		name    string
		entries []*tar.Header
	}{
		{"lib", []*tar.Header{tfile(".wh.lib"), tlink("lib", "usr/lib")}},
		{".cache", []*tar.Header{tfile(".wh..cache"), tlink(".cache", "/tmp")}},
		{"d/-x", []*tar.Header{tdir("d"), tlink("d/-x", "y"), tfile("d/.wh.-x")}},
		{"out", []*tar.Header{tlink("out", outside), tfile(".wh.out")}},
	}
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := templatetest.Import(t, s, "stack"+string(rune('a'+i)), layoutOf(t, lower, tarLayer(t, tt.entries...)))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ref, err := r.templateImage(ctx, root)
			if err != nil {
				t.Fatalf("loading the image of a layer replacing %q by a symlink: %v", tt.name, err)
			}
			if err := e.RemoveImage(context.Background(), ref); err != nil {
				t.Logf("removing %s: %v", ref, err)
			}
		})
	}
}

// tdir, tfile and tlink are the headers of a directory, an empty file
// and a symlink in a test layer.
func tdir(name string) *tar.Header {
	return &tar.Header{Name: name + "/", Mode: 0o755, Typeflag: tar.TypeDir}
}

func tfile(name string) *tar.Header {
	return &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg}
}

func tlink(name, target string) *tar.Header {
	return &tar.Header{Name: name, Linkname: target, Mode: 0o777, Typeflag: tar.TypeSymlink}
}

// tarLayer is a layer of the entries, in the order given.
func tarLayer(t *testing.T, entries ...*tar.Header) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// layoutOf writes an OCI layout holding one image of the layers.
func layoutOf(t *testing.T, layers ...v1.Layer) string {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	dp := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dp, empty.Index)
	if err == nil {
		err = p.AppendImage(img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dp
}
