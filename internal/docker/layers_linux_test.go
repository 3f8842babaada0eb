package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// TestTemplateImagesShareLayers makes the images of two templates of one
// store sharing their base layer (minimal, and minimal with one more
// layer; with WARDEN_MEASURE=1, minimal and datasci): each has one Docker
// layer per store layer, and the base is the same Docker layer, stored
// once. It logs what Docker's storage holds for them, and removes them.
func TestTemplateImagesShareLayers(t *testing.T) {
	liveEngine(t)
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	var roots []spec.Root
	if os.Getenv("WARDEN_MEASURE") != "" {
		roots = templatetest.Roots(t, "minimal", "datasci")
	} else {
		roots = minimalAndDerived(t)
	}
	r := &Runtime{engine: e}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var layers [][]string
	refs := map[string]bool{}
	for _, root := range roots {
		start := time.Now()
		ref, err := r.templateImage(ctx, root)
		if err != nil {
			t.Fatalf("making the image of %s: %v", root.Template, err)
		}
		took := time.Since(start)
		refs[ref] = true
		t.Cleanup(func() {
			if err := e.RemoveImage(context.Background(), ref); err != nil {
				t.Logf("removing %s: %v", ref, err)
			}
		})
		var img struct {
			Size   int64
			RootFS struct{ Layers []string }
		}
		if err := e.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, &img); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d layers, %d bytes, made in %v", root.Template, len(img.RootFS.Layers), img.Size, took.Round(time.Millisecond))
		layers = append(layers, img.RootFS.Layers)
	}
	if len(layers[0]) < 1 || len(layers[1]) <= len(layers[0]) || layers[0][0] != layers[1][0] {
		t.Fatalf("layers %v and %v: want the base layer first in both, datasci with more", layers[0], layers[1])
	}
	var df struct {
		Images []struct {
			RepoTags         []string
			Size, SharedSize int64
		}
	}
	if err := e.call(ctx, http.MethodGet, "/system/df", nil, nil, &df); err != nil {
		t.Fatal(err)
	}
	for _, img := range df.Images {
		for _, tag := range img.RepoTags {
			if refs[tag] {
				t.Logf("%s: size %d, shared %d", tag, img.Size, img.SharedSize)
			}
		}
	}
}

// minimalAndDerived imports the minimal test image and the same with one
// small layer more into one store, leased until the test ends.
func minimalAndDerived(t *testing.T) []spec.Root {
	t.Helper()
	lp, _ := templatetest.Image(t, "minimal")
	idx, err := layout.ImageIndexFromPath(lp)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("the minimal layout: %v, %v", im, err)
	}
	base, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "derived", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte("d\n")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	top, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	derived, err := mutate.AppendLayers(base, top)
	if err != nil {
		t.Fatal(err)
	}
	dp := filepath.Join(t.TempDir(), "derived")
	p, err := layout.Write(dp, empty.Index)
	if err == nil {
		err = p.AppendImage(derived)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return []spec.Root{templatetest.Import(t, s, "minimal", lp), templatetest.Import(t, s, "derived", dp)}
}

// TestArchiveLayers packs two layer trees (one with a whiteout marker and
// a link) as a docker-save archive: each layer's tar hashes to the diff
// id the config names, packing again gives the same id, and the manifest
// tags the image and lists the layers in order.
func TestArchiveLayers(t *testing.T) {
	base, top := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(base, "lib"), 0o755))
	must(os.WriteFile(filepath.Join(base, "lib/x"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(top, ".wh.lib"), nil, 0o644))
	must(os.Symlink("usr/lib", filepath.Join(top, "lib")))
	layers, err := measureLayers(context.Background(), []string{base, top})
	must(err)
	again, err := measureLayers(context.Background(), []string{base})
	must(err)
	if again[0].diffID != layers[0].diffID {
		t.Errorf("packing again: diff id %s, want %s", again[0].diffID, layers[0].diffID)
	}
	var buf bytes.Buffer
	must(writeArchive(&buf, "warden-template:x", layers, map[string]string{TemplateLabel: "sha256:d"}))
	files := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(err)
		b, err := io.ReadAll(tr)
		must(err)
		files[h.Name] = b
	}
	var config struct {
		Config struct{ Labels map[string]string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	must(json.Unmarshal(files["config.json"], &config))
	var manifest []struct{ RepoTags, Layers []string }
	must(json.Unmarshal(files["manifest.json"], &manifest))
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{"warden-template:x"}) || len(manifest[0].Layers) != 2 {
		t.Fatalf("manifest %+v: want one image tagged warden-template:x with 2 layers", manifest)
	}
	for i, p := range manifest[0].Layers {
		sum := sha256.Sum256(files[p])
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != config.RootFS.DiffIDs[i] || got != layers[i].diffID {
			t.Errorf("layer %d (%s): hashes to %s, config says %s, measured %s", i, p, got, config.RootFS.DiffIDs[i], layers[i].diffID)
		}
	}
	if config.Config.Labels[TemplateLabel] != "sha256:d" {
		t.Errorf("labels %v: want %s=sha256:d", config.Config.Labels, TemplateLabel)
	}
	names := map[string]bool{}
	tr = tar.NewReader(bytes.NewReader(files[manifest[0].Layers[1]]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		names[h.Name] = true
	}
	if !names[".wh.lib"] || !names["lib"] {
		t.Errorf("top layer holds %v: want the whiteout marker and the link", names)
	}
}
