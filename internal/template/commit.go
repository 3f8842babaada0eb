package template

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Commit stores, as name, the template base with one more layer on top:
// layerTar, an uncompressed tar in the image layer format (whiteouts for
// deletions), e.g. a session's changes to its root. The layer is unpacked
// as hostile input like any other. The new template's image is base's
// with the layer appended (uncompressed, so its digest is its diff id).
// baseDigest is the digest the layer was made on (a session's record
// keeps it): a base replaced under its name since then is refused, since
// the layer would go on another image. shareWith names the tenants that
// may use the new template (Everyone, or tenant ids; see UsableBy): a
// commit holds a session's files, so whom they go to is always said.
func (s *Store) Commit(base, baseDigest string, layerTar io.Reader, name string, shareWith []string) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	if err := validShare(name, shareWith); err != nil {
		return Info{}, fmt.Errorf("committing: %w", err)
	}
	unlock, err := s.lock()
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	bt, err := s.Get(base)
	if err != nil {
		return Info{}, err
	}
	if bt.Digest != baseDigest {
		return Info{}, fmt.Errorf("template %q is now %s, not the %s the session ran on (replaced since): commit refused, as the session's files belong on its own template", base, bt.Digest, orUnknown(baseDigest))
	}
	if _, err := os.Stat(s.templateDir(name)); err == nil {
		return Info{}, fmt.Errorf("template %q exists: remove it first (warden template rm %s) or choose another name", name, name)
	}
	in := s.newInstaller(context.Background(), nil)
	info, err := in.commit(bt, layerTar, name, slices.Clone(shareWith))
	if err != nil {
		in.undo()
	}
	return info, err
}

func (in *installer) commit(bt Template, layerTar io.Reader, name string, shareWith []string) (Info, error) {
	counted := &countingReader{r: layerTar}
	diffID, err := in.unpackHashed(counted)
	if err != nil {
		return Info{}, err
	}
	m, c, err := in.s.appendLayer(bt.Name, diffID, counted.n)
	if err != nil {
		return Info{}, err
	}
	digest, _, err := v1.SHA256(bytes.NewReader(m))
	if err != nil {
		return Info{}, err
	}
	t := Template{Name: name, Digest: digest.String(), Ref: bt.Name, Created: time.Now().UTC(),
		Layers: append(append([]string{}, bt.Layers...), diffID), Config: bt.Config, SharedWith: shareWith}
	return in.template(t, m, c)
}

// unpackHashed unpacks a layer whose digest is not known in advance
// (a commit's): into tmp/, then renamed to its digest, or dropped if the
// store already has that layer.
func (in *installer) unpackHashed(r io.Reader) (string, error) {
	tmp, err := os.MkdirTemp(filepath.Join(in.s.dir, "tmp"), "commit-")
	if err != nil {
		return "", err
	}
	defer func() {
		if err := removeTree(tmp); err != nil {
			in.s.o.Log.Warn("removing a temporary layer", "dir", tmp, "err", err)
		}
	}()
	if err := os.Mkdir(filepath.Join(tmp, "root"), 0o755); err != nil {
		return "", err
	}
	h := sha256.New()
	before := in.budget.bytes
	tee := io.TeeReader(r, h)
	if err := unpackLayer(tee, filepath.Join(tmp, "root"), "(committed layer)", &in.budget, in.s.o.Log.Warn); err != nil {
		return "", err
	}
	if _, err := io.Copy(io.Discard, io.LimitReader(tee, 1<<20)); err != nil {
		return "", fmt.Errorf("committed layer: %w", err)
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if _, err := os.Stat(filepath.Join(in.s.layerDir(diffID), "layer.json")); err == nil {
		in.info.Reused++
		return diffID, nil
	}
	meta, err := json.Marshal(layerMeta{DiffID: diffID, Size: before - in.budget.bytes})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "layer.json"), meta, 0o600)
	}
	dst := in.s.layerDir(diffID)
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return "", fmt.Errorf("storing the committed layer: %w", err)
	}
	in.added = append(in.added, dst)
	in.info.Unpacked++
	return diffID, nil
}

// appendLayer returns base's manifest and config with the uncompressed
// layer diffID (size bytes) appended.
func (s *Store) appendLayer(base, diffID string, size int64) (manifest, config []byte, err error) {
	dir := s.templateDir(base)
	var m v1.Manifest
	var c v1.ConfigFile
	if err := readJSON(filepath.Join(dir, "manifest.json"), &m); err != nil {
		return nil, nil, err
	}
	if err := readJSON(filepath.Join(dir, "config.json"), &c); err != nil {
		return nil, nil, err
	}
	h, err := v1.NewHash(diffID)
	if err != nil {
		return nil, nil, err
	}
	c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, h)
	c.History = append(c.History, v1.History{Created: v1.Time{Time: time.Now().UTC()}, CreatedBy: "warden template commit"})
	if config, err = json.Marshal(c); err != nil {
		return nil, nil, err
	}
	cd, n, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, nil, err
	}
	m.Config.Digest, m.Config.Size = cd, n
	mt := types.OCIUncompressedLayer
	if m.MediaType == types.DockerManifestSchema2 {
		mt = types.DockerUncompressedLayer
	}
	m.Layers = append(m.Layers, v1.Descriptor{MediaType: mt, Size: size, Digest: h})
	manifest, err = json.Marshal(m)
	return manifest, config, err
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return fmt.Errorf("reading %q: %w", p, err)
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// orUnknown names a digest a record may lack (one a Warden before
// template digests were recorded wrote).
func orUnknown(digest string) string {
	if digest == "" {
		return "unrecorded digest"
	}
	return digest
}
