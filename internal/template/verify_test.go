//go:build !slim

package template

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestImportVerifiesBlobs imports OCI layouts whose blobs are not the
// ones their names (digests) say: each is refused with what is wrong,
// nothing is installed, and an untouched layout of the same image still
// imports. A config swapped for another image's (whose layer then
// matches the config's diffIDs) would otherwise install another tree
// under the first image's digest, the security review's demonstration.
func TestImportVerifiesBlobs(t *testing.T) {
	imgA := testImage(t, baseLayer(t))
	imgB := testImage(t, topLayer(t))
	cA, err := imgA.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	lA := layerDigest(t, imgA)
	rawCB, err := imgB.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	reencoded := compressed(t, imgA)
	reencoded[4]++ // gzip's MTIME: the same tar, another blob
	tests := []struct {
		name   string
		forged map[v1.Hash][]byte // blob name: the bytes written there
		want   string
	}{
		{"other config and layer", map[v1.Hash][]byte{cA: rawCB, lA: compressed(t, imgB)}, "image config"},
		{"layer re-encoded", map[v1.Hash][]byte{lA: reencoded}, "blob does not match its digest"},
		{"layer uncompressed", map[v1.Hash][]byte{lA: uncompressed(t, imgA)}, "longer than"},
		{"layer padded", map[v1.Hash][]byte{lA: append(compressed(t, imgA), 0)}, "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "layout")
			writeLayout(t, dir, imgA)
			for h, b := range tc.forged {
				if err := os.WriteFile(blobPath(dir, h), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := openStore(t, Options{})
			_, err := s.Import(context.Background(), dir, "forged")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("import of a forged layout: %v, want an error containing %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
			if _, err := s.Get("forged"); err == nil {
				t.Errorf("the forged layout was installed")
			}
		})
	}
	good := filepath.Join(t.TempDir(), "good")
	writeLayout(t, good, imgA)
	if _, err := openStore(t, Options{}).Import(context.Background(), good, "good"); err != nil {
		t.Fatalf("import of the untouched layout: %v", err)
	}
}

// layerDigest is the (compressed) digest of img's only layer.
func layerDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("layers: %d, %v", len(ls), err)
	}
	d, err := ls[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// compressed and uncompressed are img's only layer's blob and tar.
func compressed(t *testing.T, img v1.Image) []byte {
	t.Helper()
	ls, _ := img.Layers() // layerDigest checked there is one
	return readAll(t, ls[0].Compressed)
}

func uncompressed(t *testing.T, img v1.Image) []byte {
	t.Helper()
	ls, _ := img.Layers() // layerDigest checked there is one
	return readAll(t, ls[0].Uncompressed)
}

func readAll(t *testing.T, open func() (io.ReadCloser, error)) []byte {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImportManifestDigestIsItsHash: a layout whose manifest file holds
// another manifest than its name says imports under the hash of what it
// holds, never under the name (go-containerregistry hashes the bytes).
func TestImportManifestDigestIsItsHash(t *testing.T) {
	img := testImage(t, baseLayer(t))
	named, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	other := mutate.Annotations(img, map[string]string{"other": "yes"}).(v1.Image)
	raw, err := other.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, dir, img)
	if err := os.WriteFile(blobPath(dir, named), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Options{})
	if _, err := s.Import(context.Background(), dir, "other"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("other")
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:" + hexSum(raw); got.Digest != want {
		t.Errorf("template digest %s, want %s (the hash of the manifest it holds, not its name %s)", got.Digest, want, named)
	}
}
