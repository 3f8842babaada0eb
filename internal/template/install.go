package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// layerMeta is layers/<hex>/layer.json.
type layerMeta struct {
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

// installer is one pull, import or commit: it holds the store's lock,
// unpacks the layers the store lacks, flattens the template in tmp/ and
// renames it into place. On failure it removes its temporary files and
// the layers it added (no template can use them yet).
type installer struct {
	ctx      context.Context
	s        *Store
	progress io.Writer
	budget   budget
	added    []string // layer dirs this call installed
	info     Info
}

func (s *Store) newInstaller(ctx context.Context, progress io.Writer) *installer {
	if progress == nil {
		progress = io.Discard
	}
	return &installer{ctx: ctx, s: s, progress: progress, budget: budget{bytes: s.o.MaxBytes, entries: s.o.MaxEntries}}
}

// undo removes the layers this call added, after a failure.
func (in *installer) undo() {
	for _, d := range in.added {
		if err := removeTree(d); err != nil {
			in.s.o.Log.Warn("removing a layer after a failed pull", "dir", d, "err", err)
		}
	}
}

// template flattens t's layers into a new root and renames the whole
// template into place. It refuses metadata without whom t is shared with,
// so no write path can store a template every tenant or none may use by
// forgetting it.
func (in *installer) template(t Template, manifest, config []byte) (Info, error) {
	if err := validShare(t.Name, t.SharedWith); err != nil {
		return Info{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(in.s.dir, "tmp"), "template-")
	if err != nil {
		return Info{}, fmt.Errorf("making template %q: %w", t.Name, err)
	}
	defer func() {
		if err := removeTree(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			in.s.o.Log.Warn("removing a temporary template", "dir", tmp, "err", err)
		}
	}()
	var roots []string
	for _, l := range t.Layers {
		roots = append(roots, filepath.Join(in.s.layerDir(l), "root"))
		m, err := in.s.layerMeta(l)
		if err != nil {
			return Info{}, err
		}
		t.Size += m.Size
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return Info{}, fmt.Errorf("making template %q: %w", t.Name, err)
	}
	if err := flatten(in.ctx, rootfs, roots); err != nil {
		return Info{}, fmt.Errorf("making template %q: %w", t.Name, err)
	}
	meta, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return Info{}, err
	}
	for f, b := range map[string][]byte{"template.json": meta, "manifest.json": manifest, "config.json": config} {
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o600); err != nil {
			return Info{}, fmt.Errorf("making template %q: %w", t.Name, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Info{}, fmt.Errorf("making template %q: %w", t.Name, err)
	}
	if err := os.Rename(tmp, in.s.templateDir(t.Name)); err != nil {
		return Info{}, fmt.Errorf("making template %q: %w", t.Name, err)
	}
	t.Root = filepath.Join(in.s.templateDir(t.Name), "rootfs")
	in.info.Template = t
	return in.info, nil
}

func (s *Store) layerMeta(diffID string) (layerMeta, error) {
	var m layerMeta
	b, err := os.ReadFile(filepath.Join(s.layerDir(diffID), "layer.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return m, fmt.Errorf("layer %s: reading its record: %w", diffID, err)
	}
	return m, nil
}
