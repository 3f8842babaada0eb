//go:build linux && !slim

package template

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMeasurePull logs what pulling a ~200 MB image of real files (taken
// from the host's /usr) costs, what a second template on the same layers
// costs (nothing unpacked), and compares making the flattened root with
// mounting the same layers as overlayfs lower directories. It asserts no
// timing (the host is shared); run it with WARDEN_MEASURE=1 (and as root
// for the overlayfs figure).
func TestMeasurePull(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure pulling a 200 MB image")
	}
	base := usrLayer(t, "/usr/share", 150<<20)
	top := usrLayer(t, "/usr/lib/python3", 50<<20)
	host := serveRegistry(t, nil)
	push(t, host+"/big:1", testImage(t, testLayer(t, base), testLayer(t, top)))
	t.Logf("image: %d MB uncompressed in 2 layers", (len(base)+len(top))>>20)
	s := openStore(t, Options{})
	start := time.Now()
	one, err := s.Pull(context.Background(), host+"/big:1", "one", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	start = time.Now()
	two, err := s.Pull(context.Background(), host+"/big:1", "two", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := time.Since(start)
	files, dirs := countTree(t, one.Root)
	t.Logf("first pull: %v (%d layers unpacked); second template on the same layers: %v (%d unpacked, %d reused), %.3fx the first",
		first.Round(time.Millisecond), one.Unpacked, second.Round(time.Millisecond), two.Unpacked, two.Reused, second.Seconds()/first.Seconds())
	t.Logf("root: %d files and symlinks, %d directories; store disk use %d MB (two templates)", files, dirs, duBytes(t, s.Dir())>>20)
	measureFlatten(t, s, one)
}

// measureFlatten times flattening one's layers again against mounting them
// as overlayfs lower directories, best of 3 each.
func measureFlatten(t *testing.T, s *Store, one Info) {
	var roots []string
	for _, l := range one.Layers {
		roots = append(roots, filepath.Join(s.layerDir(l), "root"))
	}
	best := func(f func(dir string) error) time.Duration {
		var b time.Duration
		for i := 0; i < 3; i++ {
			dir := t.TempDir()
			start := time.Now()
			if err := f(dir); err != nil {
				t.Logf("measuring: %v", err)
				return 0
			}
			if d := time.Since(start); b == 0 || d < b {
				b = d
			}
		}
		return b
	}
	flat := best(func(dir string) error { return flatten(context.Background(), dir, roots) })
	t.Logf("flattened root (hard links): %v to make", flat.Round(time.Microsecond))
	if os.Geteuid() != 0 {
		return
	}
	over := best(func(dir string) error {
		opts := "lowerdir=" + roots[1] + ":" + roots[0]
		if err := unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY, opts); err != nil {
			return err
		}
		return unix.Unmount(dir, 0)
	})
	t.Logf("overlayfs root: %v to mount and unmount (%.1fx faster), but a mount per template and per restart", over.Round(time.Microsecond), flat.Seconds()/over.Seconds())
}

// usrLayer tars regular files, symlinks and directories from under dir
// until about max bytes.
func usrLayer(t *testing.T, dir string, max int64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || total > max {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil || !(fi.Mode().IsRegular() || fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0) {
			return nil
		}
		link, _ := os.Readlink(p)
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil
		}
		h.Name = strings.TrimPrefix(p, "/")
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			n, err := io.Copy(tw, f)
			total += n
			return err
		}
		return nil
	})
	if err != nil && !errors.Is(err, filepath.SkipDir) {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func countTree(t *testing.T, dir string) (files, dirs int) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs++
		} else if err == nil {
			files++
		}
		return nil
	})
	return files, dirs
}

// duBytes is the disk the tree at dir uses, each inode counted once.
func duBytes(t *testing.T, dir string) int64 {
	seen := map[uint64]bool{}
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}
