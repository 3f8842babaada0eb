package template

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// GCReport is what GC removed.
type GCReport struct {
	Layers     int   `json:"layers"`     // unused layers removed
	BytesFreed int64 `json:"bytesFreed"` // their file bytes, plus leftovers in tmp/
}

// GC removes the layers no template uses, and whatever interrupted
// pulls left in tmp/ (a crash mid-pull leaves work only there).
func (s *Store) GC() (GCReport, error) {
	unlock, err := s.lock()
	if err != nil {
		return GCReport{}, err
	}
	defer unlock()
	used, err := s.usedLayers()
	if err != nil {
		return GCReport{}, err
	}
	var rep GCReport
	layers, err := os.ReadDir(filepath.Join(s.dir, "layers"))
	if err != nil {
		return rep, fmt.Errorf("listing layers: %w", err)
	}
	for _, e := range layers {
		if used[e.Name()] {
			continue
		}
		d := filepath.Join(s.dir, "layers", e.Name())
		rep.BytesFreed += treeBytes(d)
		if err := removeTree(d); err != nil {
			return rep, fmt.Errorf("removing layer %s: %w", e.Name(), err)
		}
		rep.Layers++
	}
	tmp, err := os.ReadDir(filepath.Join(s.dir, "tmp"))
	if err != nil {
		return rep, fmt.Errorf("listing %q: %w", filepath.Join(s.dir, "tmp"), err)
	}
	for _, e := range tmp {
		d := filepath.Join(s.dir, "tmp", e.Name())
		rep.BytesFreed += treeBytes(d)
		if err := removeTree(d); err != nil {
			return rep, fmt.Errorf("removing %q: %w", d, err)
		}
	}
	return rep, nil
}

// usedLayers is the set of layer hex digests some template uses.
func (s *Store) usedLayers() (map[string]bool, error) {
	ts, err := s.List()
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, t := range ts {
		for _, l := range t.Layers {
			used[hexOf(l)] = true
		}
	}
	return used, nil
}

// treeBytes sums the sizes of the regular files under dir (a file with
// several links counted at each).
func treeBytes(dir string) int64 {
	var n int64
	// The walk's func never returns an error: unreadable entries count 0.
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// Report is the store's state for doctor.
type Report struct {
	Templates int      `json:"templates"`
	Layers    int      `json:"layers"`
	Bytes     int64    `json:"bytes"` // file bytes of the stored layers
	Unused    int      `json:"unused"`
	Problems  []string `json:"problems,omitempty"`
}

// Check inspects the store: each template's record and root, each layer
// its templates name, and the layers nothing uses (GC frees them).
func (s *Store) Check() Report {
	var rep Report
	ts, err := s.List()
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	rep.Templates = len(ts)
	used := map[string]bool{}
	for _, t := range ts {
		if fi, err := os.Stat(t.Root); err != nil || !fi.IsDir() {
			rep.Problems = append(rep.Problems, fmt.Sprintf("template %q has no root tree at %s: remove and pull it again", t.Name, t.Root))
		}
		for _, l := range t.Layers {
			used[hexOf(l)] = true
			if _, err := s.layerMeta(l); err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("template %q: %v", t.Name, err))
			}
		}
	}
	layers, err := os.ReadDir(filepath.Join(s.dir, "layers"))
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
	}
	for _, e := range layers {
		rep.Layers++
		if m, err := s.layerMeta(e.Name()); err == nil {
			rep.Bytes += m.Size
		}
		if !used[e.Name()] {
			rep.Unused++
		}
	}
	return rep
}

// Collect runs f under the store's lock with stored, which says whether
// a template of the store has the manifest digest it gets: what backends
// keep per digest outside the store (gVisor's shared roots) is removed
// by f, and no pull can add the digest back meanwhile. A leased template
// is always stored (Remove refuses it), so f never sees a leased digest
// as gone.
func (s *Store) Collect(f func(stored func(digest string) bool) error) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	ts, err := s.List()
	if err != nil {
		return err
	}
	digests := map[string]bool{}
	for _, t := range ts {
		digests[t.Digest] = true
	}
	return f(func(d string) bool { return digests[d] })
}
