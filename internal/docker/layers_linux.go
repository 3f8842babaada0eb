package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"strconv"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
)

// packedLayer is one store layer as the image's layer: its tree, and the
// size and sha256 of its tar (packTree, deterministic, so the same store
// layer is the same Docker layer in every template's image).
type packedLayer struct {
	dir    string
	size   int64
	diffID string
}

// templateLayers are the layer trees of the template root, lowest
// first, from its store, refusing a template replaced since it was
// resolved (its digest is the image's tag).
func templateLayers(root spec.Root) ([]string, error) {
	s, err := template.Open(storeOf(root.Dir), template.Options{})
	if err != nil {
		return nil, err
	}
	t, err := s.Get(root.Template)
	if err != nil {
		return nil, err
	}
	if t.Digest != root.Digest {
		return nil, fmt.Errorf("template %q is now %s, not %s: start the box again", root.Template, t.Digest, root.Digest)
	}
	return s.LayerRoots(t), nil
}

// measureLayers packs each layer once to learn its tar's size and
// digest, which the archive needs before the layer's bytes.
func measureLayers(ctx context.Context, dirs []string) ([]packedLayer, error) {
	out := make([]packedLayer, len(dirs))
	for i, d := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := &countingHash{h: sha256.New()}
		if err := packTree(c, d, true); err != nil {
			return nil, fmt.Errorf("packing layer %q: %w", d, err)
		}
		out[i] = packedLayer{dir: d, size: c.n, diffID: "sha256:" + hex.EncodeToString(c.h.Sum(nil))}
	}
	return out, nil
}

// countingHash hashes and counts what is written to it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// writeArchive writes a docker-save archive of the image ref (repo:tag)
// made of layers, with labels in its config: each layer's tar first,
// packed again, then the config and manifest.json (the engine reads the
// whole archive before its manifest).
func writeArchive(w io.Writer, ref string, layers []packedLayer, labels map[string]string) error {
	tw := tar.NewWriter(w)
	diffIDs := make([]string, len(layers))
	paths := make([]string, len(layers))
	for i, l := range layers {
		diffIDs[i], paths[i] = l.diffID, strconv.Itoa(i)+"/layer.tar"
		if err := tw.WriteHeader(&tar.Header{Name: paths[i], Mode: 0o644, Size: l.size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if err := packTree(tw, l.dir, true); err != nil {
			return fmt.Errorf("packing layer %q: %w", l.dir, err)
		}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Labels": labels},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{ref}, "Layers": paths}})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		body []byte
	}{{"config.json", config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// loadTemplate makes the image TemplateRepo:tag of the template root
// from its store's layers, one Docker layer each, so templates sharing
// layers share them in Docker's storage (the engine keeps a layer it
// has once, by its chain of diff ids).
func (r *Runtime) loadTemplate(ctx context.Context, root spec.Root, tag string) error {
	dirs, err := templateLayers(root)
	if err != nil {
		return err
	}
	layers, err := measureLayers(ctx, dirs)
	if err != nil {
		return err
	}
	labels := map[string]string{TemplateLabel: root.Digest, StoreLabel: storeOf(root.Dir)}
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := writeArchive(pw, TemplateRepo+":"+tag, layers, labels)
		pw.CloseWithError(err)
		packed <- err
	}()
	err = r.engine.Load(ctx, pr)
	pr.CloseWithError(errors.New("the load ended"))
	if perr := <-packed; perr != nil && err == nil {
		err = perr
	}
	return err
}
