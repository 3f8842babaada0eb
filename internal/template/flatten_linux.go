package template

import (
	"errors"
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// link hard-links the layer's file src as rel, replacing what a lower
// layer put there, through a handle on rel's parent opened inside the
// root, so the new name cannot land outside it. linkat without
// AT_SYMLINK_FOLLOW links a symlink itself.
func (f *flattener) link(src, rel string) error {
	parent, base := path.Dir(rel), path.Base(rel)
	if f.parent == nil || f.dirName != parent {
		f.closeDir()
		d, err := f.root.Open(parent)
		if err != nil {
			return err
		}
		f.parent, f.dirName = d, parent
	}
	err := unix.Linkat(unix.AT_FDCWD, src, int(f.parent.Fd()), base, 0)
	if errors.Is(err, unix.EEXIST) {
		if err := f.remove(rel); err != nil {
			return err
		}
		return f.link(src, rel)
	}
	if err != nil {
		return fmt.Errorf("linking %q: %w", rel, err)
	}
	return nil
}
