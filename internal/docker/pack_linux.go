package docker

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/template"
)

// inode identifies a file, to pack each hard-linked file once.
type inode struct{ dev, ino uint64 }

// packTree writes the tree at dir to w as a tar of a root file system,
// the one packer of both images Warden makes (a template's, and its own
// root image): directories, regular files and symlinks as they are (the
// trees hold nothing else), every entry owned by root, files linked to
// each other in the tree packed once and linked in the tar. Modification
// times are kept with keepTimes, since Python checks its cached bytecode
// against them; without, every time is zero, so the same content packs
// the same bytes (the root image is tagged by them). Set-id bits are
// dropped (the store drops them already) and symlinks are written as
// links, never followed: a template's tree is an image's, so hostile.
func packTree(w io.Writer, dir string, keepTimes bool) error {
	tw := tar.NewWriter(w)
	if err := packDir(tw, dir, "", map[inode]string{}, keepTimes); err != nil {
		return err
	}
	return tw.Close()
}

// packDir writes the entries under the tree's directory rel ("" for its
// top), each directory's whiteouts before its other entries
// (template.HidesFirst), so Docker applies a layer that deletes a name
// and puts a new entry there in the order that works.
func packDir(tw *tar.Writer, dir, rel string, seen map[inode]string, keepTimes bool) error {
	p := filepath.Join(dir, rel)
	ents, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range template.HidesFirst(ents) {
		fi, err := e.Info()
		if err != nil {
			return err
		}
		r := filepath.Join(rel, e.Name())
		if err := packEntry(tw, filepath.Join(p, e.Name()), r, fi, seen, keepTimes); err != nil {
			return err
		}
		if fi.IsDir() {
			if err := packDir(tw, dir, r, seen, keepTimes); err != nil {
				return err
			}
		}
	}
	return nil
}

// packEntry writes one entry of the tree.
func packEntry(tw *tar.Writer, p, rel string, fi fs.FileInfo, seen map[inode]string, keepTimes bool) error {
	h := &tar.Header{Name: rel, Mode: int64(fi.Mode().Perm()), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if keepTimes {
		h.ModTime = fi.ModTime().Truncate(time.Second)
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		h.Mode |= unix.S_ISVTX
	}
	switch {
	case fi.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, rel+"/"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
	case fi.Mode().IsRegular():
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%q: no inode", p)
		}
		id := inode{uint64(st.Dev), st.Ino}
		if st.Nlink > 1 {
			if first, ok := seen[id]; ok {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				return tw.WriteHeader(h)
			}
			seen[id] = rel
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		return copyFile(tw, p, fi.Size())
	default:
		return nil // a template has no devices, fifos or sockets
	}
	return tw.WriteHeader(h)
}

// copyFile copies exactly size bytes of the regular file p, opened
// without following a link.
func copyFile(w io.Writer, p string, size int64) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(w, f, size); err != nil {
		return fmt.Errorf("packing %q: %w", p, err)
	}
	return nil
}
