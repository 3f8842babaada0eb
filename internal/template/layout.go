//go:build !slim

package template

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// layoutImage is the one image of the OCI layout at dir. A layout holds
// only regular files and directories, so a symlink anywhere (say blobs
// pointing at another layout on the host, or index.json at /dev/zero) is
// refused before anything is read, and index.json, the manifest and the
// config are refused above their caps before they are read whole. Its
// layers are hashed as they are read (verifiedLayout).
func layoutImage(dir string) (v1.Image, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI image layout: %w", err)
	}
	if err := plainTree(dir); err != nil {
		return nil, err
	}
	if err := capFile(filepath.Join(dir, "index.json"), "index.json", maxIndex); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI image layout: %w", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("the layout holds %d images: import takes exactly one", len(m.Manifests))
	}
	d := m.Manifests[0].Digest
	if err := capFile(blobPath(dir, d), "the image manifest", maxIndex); err != nil {
		return nil, err
	}
	img, err := idx.Image(d)
	if err != nil {
		return nil, err
	}
	im, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("reading the image manifest: %w", err)
	}
	if err := capFile(blobPath(dir, im.Config.Digest), "the image config", maxConfig); err != nil {
		return nil, err
	}
	return verifiedLayout{img}, nil
}

// blobPath is where a layout keeps the blob h (NewHash checked h's
// algorithm and hex, so it names a file under blobs/).
func blobPath(dir string, h v1.Hash) string {
	return filepath.Join(dir, "blobs", h.Algorithm, h.Hex)
}

// plainTree refuses a tree holding anything but regular files and
// directories.
func plainTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading the OCI layout: %w", err)
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			return fmt.Errorf("OCI layout entry %q is a %s: a layout holds only regular files and directories", rel, kind(d.Type()))
		}
		return nil
	})
}

func kind(m fs.FileMode) string {
	if m&fs.ModeSymlink != 0 {
		return "symlink"
	}
	return "special file"
}

// capFile refuses what as p unless it is a regular file of at most max
// bytes.
func capFile(p, what string, max int64) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("not an OCI image layout: %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("OCI layout: %s is not a regular file", what)
	}
	if fi.Size() > max {
		return fmt.Errorf("OCI layout: %s is %d bytes, over the cap of %d", what, fi.Size(), max)
	}
	return nil
}

// checkDockerArchive checks, from the headers alone (reading only a
// capped manifest.json), what go-containerregistry would read whole into
// memory from a docker save archive: it refuses sparse entries (a few
// bytes declaring gigabytes), a manifest.json over maxIndex, a config
// over maxConfig, a manifest.json or config that is a link (which
// go-containerregistry would follow to any other entry), and more than
// maxEntries entries.
func checkDockerArchive(p string, maxEntries int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	sizes := map[string]int64{}
	links := map[string]bool{} // names some entry makes a link (go-containerregistry follows them)
	var manifest []byte
	tr := tar.NewReader(f)
	for n := int64(0); ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("not a tar archive: %w", err)
		}
		if n >= maxEntries {
			return errors.New("the archive has more entries than the per-pull cap (raise --max-entries)")
		}
		name := path.Clean(h.Name)
		if sparse(h) {
			return fmt.Errorf("archive entry %q is a sparse file: docker save writes none, refused", h.Name)
		}
		sizes[name] = max(sizes[name], h.Size)
		if h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
			links[name] = true
		}
		if name == "manifest.json" {
			if manifest, err = readCapped(tr, h.Size, maxIndex, "manifest.json"); err != nil {
				return err
			}
		}
	}
	if links["manifest.json"] {
		return errors.New("the archive's manifest.json is a link: docker save writes a regular file, refused")
	}
	var m []struct{ Config string }
	if err := json.Unmarshal(manifest, &m); err != nil {
		return fmt.Errorf("reading the archive's manifest.json: %w", err)
	}
	for _, e := range m {
		if links[path.Clean(e.Config)] {
			return fmt.Errorf("the archive's image config %q is a link: docker save writes a regular file, refused", e.Config)
		}
		if s := sizes[path.Clean(e.Config)]; s > maxConfig {
			return fmt.Errorf("the archive's image config %q is %d bytes, over the cap of %d", e.Config, s, maxConfig)
		}
	}
	return nil
}

// sparse reports a GNU sparse entry, old format or PAX.
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// readCapped reads an entry of declared size n, refusing it above max.
func readCapped(r io.Reader, n, max int64, what string) ([]byte, error) {
	if n > max {
		return nil, fmt.Errorf("the archive's %s is %d bytes, over the cap of %d", what, n, max)
	}
	return io.ReadAll(io.LimitReader(r, max))
}
