//go:build !slim

package template

// The image side of the installer: Pull and Import (pull.go) hand it a
// v1.Image, whose declared sizes it checks before unpacking each layer
// the store lacks. The slim build has neither (pull_slim.go), so this
// file is left out of it with them; commit.go uses only install.go.

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
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Caps on what an image may declare, checked before anything of that
// size is read: an image's metadata is read whole into memory, and each
// layer is a walk of its tree while flattening under the store's lock.
const (
	maxIndex  = 4 << 20 // an OCI layout's index.json, a manifest, a docker save manifest.json
	maxConfig = 8 << 20 // an image config
	maxLayers = 128
)

// install holds the store's lock for the whole call while open finds
// the image (an OCI layout archive is unpacked by open under the same
// lock and budget as the layers, so GC cannot delete it and it cannot
// double the per-pull cap), then installs it as template name,
// recording ref. done, if open returns one, runs before the lock is
// released.
func (s *Store) install(ctx context.Context, name, ref string, progress io.Writer, open func(*installer) (v1.Image, func(), error)) (Info, error) {
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	unlock, err := s.lock()
	if err != nil {
		return Info{}, err
	}
	defer unlock()
	if _, err := os.Stat(s.templateDir(name)); err == nil {
		return Info{}, fmt.Errorf("template %q exists: remove it first (warden template rm %s) or choose another --name", name, name)
	}
	in := s.newInstaller(ctx, progress)
	img, done, err := open(in)
	if done != nil {
		defer done()
	}
	var info Info
	if err == nil {
		info, err = in.image(img, name, ref)
	}
	if err != nil {
		in.undo()
	}
	return info, err
}

// image checks img's declared sizes against the cap, then unpacks its
// layers and writes the template.
func (in *installer) image(img v1.Image, name, ref string) (Info, error) {
	digest, rawM, m, err := manifestOf(img)
	if err != nil {
		return Info{}, err
	}
	if err := in.declaredManifest(m); err != nil {
		return Info{}, err
	}
	rawC, err := img.RawConfigFile()
	if err != nil {
		return Info{}, fmt.Errorf("reading the image config: %w", err)
	}
	if err := checkBlob(rawC, m.Config, "image config"); err != nil {
		return Info{}, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawC))
	if err != nil {
		return Info{}, fmt.Errorf("reading the image config: %w", err)
	}
	if err := in.declared(m, cfg); err != nil {
		return Info{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return Info{}, fmt.Errorf("reading the image's layers: %w", err)
	}
	if len(layers) != len(m.Layers) {
		return Info{}, fmt.Errorf("the image has %d layers but its manifest lists %d: the image is malformed", len(layers), len(m.Layers))
	}
	var diffIDs []string
	for i, l := range layers {
		want := cfg.RootFS.DiffIDs[i].String()
		if err := in.layer(want, l.Uncompressed); err != nil {
			return Info{}, err
		}
		diffIDs = append(diffIDs, want)
	}
	t := Template{Name: name, Digest: digest, Ref: ref, Created: time.Now().UTC(), Layers: diffIDs, Config: configOf(cfg), SharedWith: []string{Everyone}}
	return in.template(t, rawM, rawC)
}

// manifestOf is img's digest, raw and parsed manifest: the digest is
// go-containerregistry's hash of the raw manifest for every source (a
// layout's index only names the file it reads), and the manifest is
// parsed from the same bytes.
func manifestOf(img v1.Image) (string, []byte, *v1.Manifest, error) {
	d, err := img.Digest()
	if err != nil {
		return "", nil, nil, fmt.Errorf("reading the image manifest: %w", err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return "", nil, nil, fmt.Errorf("reading the image manifest: %w", err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return "", nil, nil, fmt.Errorf("reading the image manifest: %w", err)
	}
	return d.String(), raw, m, nil
}

// declaredManifest refuses, before the config is fetched or read, a
// manifest declaring a config larger than maxConfig or the per-pull cap
// (the config is read whole into memory; a registry verifies the blob
// against this declared size), or more than maxLayers layers (each one
// is a walk of its tree while flattening, under the store's lock).
func (in *installer) declaredManifest(m *v1.Manifest) error {
	if c := m.Config.Size; c < 0 || c > maxConfig || c > in.s.o.MaxBytes {
		return fmt.Errorf("image config declares %d bytes: configs must be 0-%d bytes and under the per-pull cap", c, min(maxConfig, in.s.o.MaxBytes))
	}
	if len(m.Layers) > maxLayers {
		return fmt.Errorf("image manifest lists %d layers: at most %d are accepted (squash the image)", len(m.Layers), maxLayers)
	}
	return nil
}

// declared refuses a manifest whose layers add up past the cap, whose
// config lists a different number of layers than the manifest, or lists
// one layer twice (a stored layer would otherwise be walked again per
// listing while flattening).
func (in *installer) declared(m *v1.Manifest, cfg *v1.ConfigFile) error {
	if len(m.Layers) != len(cfg.RootFS.DiffIDs) {
		return fmt.Errorf("image manifest lists %d layers but its config %d: the image is malformed", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	seen := map[v1.Hash]bool{}
	for _, d := range cfg.RootFS.DiffIDs {
		if seen[d] {
			return fmt.Errorf("image config lists layer %s twice: refused", d)
		}
		seen[d] = true
	}
	var total int64
	for _, l := range m.Layers {
		if l.Size < 0 {
			return fmt.Errorf("layer %s: negative size in the manifest", l.Digest)
		}
		total += l.Size
		if total > in.s.o.MaxBytes || total < 0 {
			return fmt.Errorf("image layers declare more than the per-pull cap of %d bytes (raise --max-size)", in.s.o.MaxBytes)
		}
	}
	return nil
}

func configOf(c *v1.ConfigFile) Config {
	return Config{Env: c.Config.Env, User: c.Config.User, WorkingDir: c.Config.WorkingDir, Entrypoint: c.Config.Entrypoint, Cmd: c.Config.Cmd}
}

// layer makes sure the layer whose uncompressed digest is diffID is
// stored, unpacking open()'s stream if not, and verifying while it
// streams that the content has that digest.
func (in *installer) layer(diffID string, open func() (io.ReadCloser, error)) error {
	if m, err := in.s.layerMeta(diffID); err == nil {
		if m.Size > in.budget.bytes {
			return fmt.Errorf("layer %s: stored layers add up to more than the per-pull cap (raise --max-size)", short(diffID))
		}
		in.budget.bytes -= m.Size
		in.info.Reused++
		fmt.Fprintf(in.progress, "layer %s: already stored\n", short(diffID))
		return nil
	}
	if _, err := v1.NewHash(diffID); err != nil {
		return fmt.Errorf("layer %q: bad digest: %w", diffID, err)
	}
	start := time.Now()
	rc, err := open()
	if err != nil {
		return fmt.Errorf("layer %s: %w", diffID, err)
	}
	defer rc.Close()
	size, err := in.unpackVerified(rc, diffID)
	if err != nil {
		return err
	}
	in.info.Unpacked++
	fmt.Fprintf(in.progress, "layer %s: unpacked %d bytes in %.1f s\n", short(diffID), size, time.Since(start).Seconds())
	return nil
}

// unpackVerified unpacks r into a temporary directory, hashes it whole
// (trailing bytes count against the cap too), and renames it into the
// store only if the hash is diffID.
func (in *installer) unpackVerified(r io.Reader, diffID string) (int64, error) {
	tmp, err := os.MkdirTemp(filepath.Join(in.s.dir, "tmp"), "layer-")
	if err != nil {
		return 0, fmt.Errorf("layer %s: %w", diffID, err)
	}
	defer func() {
		if err := removeTree(tmp); err != nil {
			in.s.o.Log.Warn("removing a temporary layer", "dir", tmp, "err", err)
		}
	}()
	if err := os.Mkdir(filepath.Join(tmp, "root"), 0o755); err != nil {
		return 0, fmt.Errorf("layer %s: %w", diffID, err)
	}
	h := sha256.New()
	before := in.budget.bytes
	tee := io.TeeReader(r, h)
	if err := unpackLayer(tee, filepath.Join(tmp, "root"), diffID, &in.budget, in.s.o.Log.Warn); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, io.LimitReader(tee, in.budget.bytes+1))
	if err != nil {
		return 0, fmt.Errorf("layer %s: reading the tar stream: %w", diffID, err)
	}
	if n > in.budget.bytes {
		return 0, fmt.Errorf("layer %s: trailing data past the per-pull cap (raise --max-size)", diffID)
	}
	in.budget.bytes -= n
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID {
		return 0, fmt.Errorf("layer %s: content does not match its digest (it hashes to %s): refused", diffID, got)
	}
	size := before - in.budget.bytes
	meta, err := json.Marshal(layerMeta{DiffID: diffID, Size: size})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "layer.json"), meta, 0o600)
	}
	dst := in.s.layerDir(diffID)
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		return 0, fmt.Errorf("layer %s: storing: %w", diffID, err)
	}
	in.added = append(in.added, dst)
	return size, nil
}

func short(digest string) string {
	h := hexOf(digest)
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}
