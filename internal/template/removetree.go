package template

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// removeTree removes dir and everything under it, first giving the owner
// rwx on every directory: a layer's directory may be 0555 or 0000, which
// would make RemoveAll fail forever in a store not run as root.
func removeTree(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // RemoveAll below reports what it cannot remove
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("making %q removable: %w", p, err)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}
