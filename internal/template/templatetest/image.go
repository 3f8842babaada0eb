package templatetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageConfig is the runtime configuration every test image carries.
var imageConfig = v1.Config{
	Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
	Cmd:        []string{"bash"},
	WorkingDir: "/",
}

// assemble makes the image from the gzip layer files, in order.
func assemble(layerFiles ...string) (v1.Image, error) {
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       imageConfig,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring image: %w", err)
	}
	for _, f := range layerFiles {
		l, err := tarball.LayerFromFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading layer %q: %w", f, err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, fmt.Errorf("adding layer %q: %w", f, err)
		}
	}
	return img, nil
}

// save writes img as an OCI layout and a docker-save tarball at p.
func save(img v1.Image, imageName string, p Paths) error {
	if err := os.MkdirAll(filepath.Dir(p.Tar), 0o755); err != nil {
		return fmt.Errorf("making %q: %w", filepath.Dir(p.Tar), err)
	}
	lp, err := layout.Write(p.Layout, empty.Index)
	if err != nil {
		return fmt.Errorf("writing layout %q: %w", p.Layout, err)
	}
	ann := map[string]string{"org.opencontainers.image.ref.name": Tag(imageName)}
	if err := lp.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		return fmt.Errorf("writing image to layout %q: %w", p.Layout, err)
	}
	tag, err := name.NewTag(Tag(imageName))
	if err != nil {
		return fmt.Errorf("naming image: %w", err)
	}
	if err := tarball.WriteToFile(p.Tar, tag, img); err != nil {
		return fmt.Errorf("writing %q: %w", p.Tar, err)
	}
	return nil
}

// load reads image name back from its OCI layout.
func load(p Paths) (v1.Image, error) {
	lp, err := layout.FromPath(p.Layout)
	if err != nil {
		return nil, fmt.Errorf("opening layout %q: %w", p.Layout, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading index of %q: %w", p.Layout, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading index of %q: %w", p.Layout, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("layout %q holds %d images, want 1", p.Layout, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
