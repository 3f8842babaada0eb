package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// UnusedTemplateRoots lists the shared roots in dir (StateDir, but in
// tests) of templates keep does not hold (keep gets "sha256:<hex>") that
// no box's bundle names: what RemoveTemplateRoots would remove, for
// doctor (which does not try the lock a box starting may hold yet).
func UnusedTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	used, err := bundleRoots(dir)
	if err != nil {
		return nil, err
	}
	return rootfs.UnusedImageTemplates(dir, keep, used)
}

// RemoveTemplateRoots removes the shared roots UnusedTemplateRoots lists
// (rootfs.RemoveImageTemplates): `warden template gc` and `rm` call it
// under the store's lock. Besides the lock each box holds on its root
// (rootfs.HoldImageTemplate), a root a box's bundle names is kept. It
// returns the digests removed.
func RemoveTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	used, err := bundleRoots(dir)
	if err != nil {
		return nil, err
	}
	return rootfs.RemoveImageTemplates(dir, keep, used)
}

// bundleRoots is the set of roots the boxes' bundles in dir name: a box
// is running, or starting, on each.
func bundleRoots(dir string) (map[string]bool, error) {
	cfgs, err := filepath.Glob(filepath.Join(dir, "box-*", "config.json"))
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, c := range cfgs {
		b, err := os.ReadFile(c)
		if errors.Is(err, os.ErrNotExist) {
			continue // the box ended since the glob
		}
		var cfg struct {
			Root struct{ Path string } `json:"root"`
		}
		if err == nil {
			err = json.Unmarshal(b, &cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("reading the bundle %q: %w (the roots in use are unknown, none removed)", c, err)
		}
		used[filepath.Clean(cfg.Root.Path)] = true
	}
	return used, nil
}
