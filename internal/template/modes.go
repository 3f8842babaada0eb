package template

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// applyModes gives each directory still in root its recorded mode,
// deepest first. Unpacking and flattening make directories 0700 and
// apply modes only here, at the end: a directory made 0555 (or 0000)
// while later entries still had to be written into it would make the
// write fail with EACCES in a store not run as root, and leave a tree
// nothing can remove. A name that is no longer a directory (a later
// entry replaced it) is skipped.
func applyModes(root *os.Root, modes map[string]fs.FileMode) error {
	names := make([]string, 0, len(modes))
	for n := range modes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		di, dj := strings.Count(names[i], "/"), strings.Count(names[j], "/")
		if di != dj {
			return di > dj
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		fi, err := root.Lstat(n)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
			continue
		}
		if err == nil {
			err = root.Chmod(n, modes[n])
		}
		if err != nil {
			return err
		}
	}
	return nil
}
