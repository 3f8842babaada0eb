package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// zeroTime is every packed entry's time.
var zeroTime = time.Unix(0, 0)

// rootRepo names the image Warden builds from the root template.
const rootRepo = "warden-root"

// rootImage makes sure the engine has the image of the template t, and
// names it: repo:tag, the tag a hash of its content, so a host whose
// /etc changed gets a new image and an unchanged one builds it once.
// The image holds only the template's small files and mount points; the
// host's /usr and the bound /etc directories are mounted at run time, as
// in the native root, so no registry and no copy of /usr are needed.
func rootImage(ctx context.Context, e engineAPI, t rootfs.Template) (string, error) {
	tarball, err := tarDir(t.Dir)
	if err != nil {
		return "", fmt.Errorf("packing the root template: %w", err)
	}
	sum := sha256.Sum256(tarball)
	tag := hex.EncodeToString(sum[:6])
	ref := rootRepo + ":" + tag
	if ok, err := e.HasImage(ctx, ref); err != nil || ok {
		return ref, err
	}
	if err := e.Import(ctx, rootRepo, tag, bytes.NewReader(tarball)); err != nil {
		return "", fmt.Errorf("importing %s: %w", ref, err)
	}
	return ref, nil
}

// tarDir packs dir as a root file system: every entry owned by root,
// symlinks kept, times zeroed so the same content packs the same bytes.
func tarDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = rel, 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = zeroTime, zeroTime, zeroTime
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
