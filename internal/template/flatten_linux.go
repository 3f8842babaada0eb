package template

import (
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// link hard-links the layer's file src as rel, through a handle on rel's
// parent opened inside the root, so the new name cannot land outside it.
// linkat without AT_SYMLINK_FOLLOW links a symlink itself.
func (f *flattener) link(src, rel string) error {
	dir, err := f.root.Open(path.Dir(rel))
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := unix.Linkat(unix.AT_FDCWD, src, int(dir.Fd()), path.Base(rel), 0); err != nil {
		return fmt.Errorf("linking %q: %w", rel, err)
	}
	return nil
}
