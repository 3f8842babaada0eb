package template

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Share sets whom template name is shared with (see UsableBy), e.g. a
// commit recorded before Warden kept it, or one the operator widens or
// narrows later. It rewrites template.json atomically (a new file renamed
// over it) under the store's lock, so a reader sees the old record or the
// new one, never a mix; sessions already running keep their lease.
func (s *Store) Share(name string, shareWith []string) (Template, error) {
	if err := ValidName(name); err != nil {
		return Template{}, err
	}
	if err := validShare(name, shareWith); err != nil {
		return Template{}, fmt.Errorf("sharing: %w", err)
	}
	unlock, err := s.lock()
	if err != nil {
		return Template{}, err
	}
	defer unlock()
	t, err := s.Get(name)
	if err != nil {
		return Template{}, err
	}
	t.SharedWith = slices.Clone(shareWith)
	if err := s.writeMeta(t); err != nil {
		return Template{}, fmt.Errorf("sharing template %q: %w", name, err)
	}
	return t, nil
}

// writeMeta replaces t's template.json with t: written to a temporary
// file beside it, synced, and renamed over it.
func (s *Store) writeMeta(t Template) error {
	meta, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	dir := s.templateDir(t.Name)
	f, err := os.CreateTemp(dir, ".template.json-")
	if err != nil {
		return err
	}
	_, err = f.Write(meta)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, "template.json"))
	}
	if err != nil {
		if rerr := os.Remove(f.Name()); rerr != nil {
			s.o.Log.Warn("removing a temporary template.json", "file", f.Name(), "err", rerr)
		}
	}
	return err
}
