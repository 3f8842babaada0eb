package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
)

// rootName matches the name of a template's shared root in StateDir
// (rootfs.SharedImageTemplate: img-<digest hex>-<layout>).
var rootName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^img-([0-9a-f]{64})-[0-9a-f]+$`) })

// UnusedTemplateRoots lists the shared roots in dir (StateDir, but in
// tests) of templates keep does not hold (keep gets "sha256:<hex>") that
// no box's bundle names: what RemoveTemplateRoots would remove, for
// doctor.
func UnusedTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	return unusedRoots(dir, keep)
}

// RemoveTemplateRoots removes the shared roots UnusedTemplateRoots lists:
// `warden template gc` and `rm` call it under the store's lock, so a
// template's root goes with it, from memory (/run) where it would
// otherwise stay until reboot. Stores share StateDir (a root is a cache,
// keyed by digest), so a root another store's box uses is kept: each box
// holds a shared flock on its root while it lives (holdRoot), and a root
// is renamed away only under an exclusive one taken without waiting, so
// a root a box holds or a bundle names is skipped. It returns the
// digests removed.
func RemoveTemplateRoots(dir string, keep func(digest string) bool) ([]string, error) {
	unused, err := unusedRoots(dir, keep)
	var removed []string
	var errs []error
	for _, p := range unused {
		gone, err := renameUnused(dir, p)
		if err != nil {
			errs = append(errs, err)
		}
		if gone == "" {
			continue
		}
		if err := os.RemoveAll(gone); err != nil {
			errs = append(errs, fmt.Errorf("removing the template root %q: %w", gone, err))
			continue
		}
		removed = append(removed, "sha256:"+rootName().FindStringSubmatch(filepath.Base(p))[1])
	}
	return removed, errors.Join(append([]error{err}, errs...)...)
}

// renameUnused renames the root p away under gc's exclusive lock, and
// returns where to ("" if a box holds it, or on error). Renamed first: a
// box starting now writes a fresh root rather than binding one half
// removed, and a crash leaves a tmp-<pid> entry the next Warden's stale
// sweep removes.
func renameUnused(dir, p string) (gone string, err error) {
	f, ok, err := lockUnusedRoot(p)
	if !ok {
		return "", err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("unlocking the template root %q: %w", p, cerr))
		}
	}()
	gone = filepath.Join(dir, "tmp-"+strconv.Itoa(os.Getpid())+"-gc-"+filepath.Base(p))
	if err := os.Rename(p, gone); err != nil {
		return "", fmt.Errorf("removing the template root %q: %w", p, err)
	}
	return gone, nil
}

func unusedRoots(dir string, keep func(string) bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", dir, err)
	}
	used, err := bundleRoots(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		m := rootName().FindStringSubmatch(e.Name())
		p := filepath.Join(dir, e.Name())
		if m != nil && e.IsDir() && !keep("sha256:"+m[1]) && !used[p] {
			out = append(out, p)
		}
	}
	return out, nil
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
