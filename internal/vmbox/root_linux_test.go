package vmbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestAssembleRootPrivateReadOnly: on a host whose mounts are shared (as
// systemd makes them), the binds into a box's root do not appear in the
// template it binds, and a mount nested in a bound host directory is
// read-only in the box's root too.
func TestAssembleRootPrivateReadOnly(t *testing.T) {
	base := t.TempDir()
	err := testhost.InMountNS(t, func() error {
		if err := unix.Mount("t", base, "tmpfs", 0, ""); err != nil {
			return err
		}
		if err := unix.Mount("", base, "", unix.MS_SHARED, ""); err != nil {
			return err
		}
		tmpl := rootfs.Template{Dir: filepath.Join(base, "tmpl"), From: filepath.Join(base, "host"), Binds: []string{"usr"}}
		nested := filepath.Join(base, "host", "usr", "nested")
		for _, d := range []string{filepath.Join(tmpl.Dir, "usr"), nested} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := unix.Mount("n", nested, "tmpfs", 0, ""); err != nil {
			return err
		}
		root := filepath.Join(base, "root")
		if err := assembleRoot(tmpl, root); err != nil {
			return err
		}
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return err
		}
		if strings.Contains(string(mi), " "+filepath.Join(tmpl.Dir, "usr")+" ") {
			t.Errorf("the bind into the box's root appeared in the template:\n%s", mi)
		}
		for _, p := range []string{filepath.Join(root, "usr", "nested", "f"), filepath.Join(root, "f")} {
			f, err := os.Create(p)
			if err == nil {
				f.Close()
			}
			if !errors.Is(err, unix.EROFS) {
				t.Errorf("creating %s: %v, want EROFS", p, err)
			}
		}
		return unmountRoot(root)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAssembleImageRoot: a box's root on a template is Warden's shared
// root of the image with the image's entries bound from its tree: the
// very files of the tree, every mount of it read-only, nosuid and nodev
// (a set-uid file planted in the tree included), nothing written into the
// tree, and the root kept from gc while the box holds it, and while a
// box directory's root binds it after the lock is gone (a dead Warden's).
func TestAssembleImageRoot(t *testing.T) {
	base, image := t.TempDir(), t.TempDir()
	for _, d := range []string{"usr/bin", "var/tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(image, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	suid := filepath.Join(image, "usr/bin/suid")
	if err := os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil { // os.Chmod drops 0o4000: only ModeSetuid sets it
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(image, "bin")); err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	before := treeNames(t, image)
	err := testhost.InMountNS(t, func() error {
		tmpl, held, err := rootfs.HoldImageTemplate(base, spec.Root{Template: "t", Dir: image, Digest: digest})
		if err != nil {
			return err
		}
		root := filepath.Join(base, "box-x", "root")
		if err := os.Mkdir(filepath.Dir(root), 0o700); err != nil {
			return err
		}
		if err := assembleRoot(tmpl, root); err != nil {
			return err
		}
		checkImageRoot(t, root, suid)
		if gone, err := RemoveTemplateRoots(base, func(string) bool { return false }); err != nil || len(gone) != 0 {
			t.Errorf("gc while the box holds its root: removed %q, %v; want nothing", gone, err)
		}
		if err := held.Close(); err != nil {
			return err
		}
		if gone, err := RemoveTemplateRoots(base, func(string) bool { return false }); err != nil || len(gone) != 0 {
			t.Errorf("gc while a box's root binds it, unlocked: removed %q, %v; want nothing", gone, err)
		}
		if err := unmountRoot(root); err != nil {
			return err
		}
		if gone, err := RemoveTemplateRoots(base, func(string) bool { return false }); err != nil || len(gone) != 1 {
			t.Errorf("gc once the box is gone: removed %q, %v; want its root", gone, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := treeNames(t, image); after != before {
		t.Errorf("the image's tree changed under the box:\nbefore %s\nafter  %s", before, after)
	}
}

// checkImageRoot checks the assembled root: the tree's own set-uid file
// (the same inode), the image's link kept, every mount at or below root
// read-only, nosuid and nodev.
func checkImageRoot(t *testing.T, root, suid string) {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Stat(suid, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(root, "usr/bin/suid"), &b); err != nil || a.Ino != b.Ino || b.Mode&unix.S_ISUID == 0 {
		t.Errorf("the root's usr/bin/suid: %v, inode %d, mode %#o; want the tree's, %d, set-uid (nosuid is what stops it)", err, b.Ino, b.Mode, a.Ino)
	}
	if l, err := os.Readlink(filepath.Join(root, "bin")); err != nil || l != "usr/bin" {
		t.Errorf("the root's bin: %q, %v; want the image's link to usr/bin", l, err)
	}
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || (f[4] != root && !strings.HasPrefix(f[4], root+"/")) {
			continue
		}
		n++
		opts := "," + f[5] + ","
		for _, o := range []string{",ro,", ",nosuid,", ",nodev,"} {
			if !strings.Contains(opts, o) {
				t.Errorf("mount %s has options %s, want %s among them", f[4], f[5], strings.Trim(o, ","))
			}
		}
	}
	if n < 3 { // the root, and the image's usr and var (its /etc is copied)
		t.Errorf("%d mounts at or below the root, want the root and the image's directories", n)
	}
}

// treeNames lists every path under dir with its mode, size and
// modification time, for comparing trees.
func treeNames(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s:%v:%d:%d ", strings.TrimPrefix(p, dir), fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestAssembleRootForeignMountPoint: a shared root written for another
// tree with the same digest, whose mount point for the tree's opt is a
// link out of the root (the test's own directory), a file or missing, is
// refused, and nothing is bound outside the root. Harmless if broken: the
// link's target is a directory the test made, in a private mount
// namespace.
func TestAssembleRootForeignMountPoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(tree, outside string) error
	}{
		{"link out", func(tree, outside string) error { return os.Symlink(outside, filepath.Join(tree, "opt")) }},
		{"file", func(tree, _ string) error { return os.WriteFile(filepath.Join(tree, "opt"), nil, 0o644) }},
		{"missing", func(string, string) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, first, tree, outside := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
			if err := tc.first(first, outside); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(tree, "opt"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tree, "opt", "marker"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			err := testhost.InMountNS(t, func() error {
				return assembleForeign(t, base, first, tree, outside)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// assembleForeign writes the shared root for first, assembles a box's
// root on tree with the same digest and checks it is refused with
// nothing bound over outside.
func assembleForeign(t *testing.T, base, first, tree, outside string) error {
	digest := "sha256:" + strings.Repeat("cd", 32)
	if _, err := rootfs.SharedImageTemplate(base, first, digest); err != nil {
		return err
	}
	tmpl, held, err := rootfs.HoldImageTemplate(base, spec.Root{Template: "t", Dir: tree, Digest: digest})
	if err != nil {
		return err
	}
	defer held.Close()
	root := filepath.Join(base, "box-x", "root")
	if err := os.Mkdir(filepath.Dir(root), 0o700); err != nil {
		return err
	}
	aerr := assembleRoot(tmpl, root)
	if !errors.Is(aerr, errForeignRoot) {
		t.Errorf("assembleRoot on a root written for another tree: %v, want %v", aerr, errForeignRoot)
	}
	if _, err := os.Lstat(filepath.Join(outside, "marker")); err == nil {
		t.Errorf("the tree's opt was bound over %s, outside the root", outside)
	}
	if err := unmountRoot(root); err != nil {
		return err
	}
	mi, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return err
	}
	if strings.Contains(string(mi), " "+outside+" ") {
		t.Errorf("a mount at %s outlived the box's root", outside)
	}
	return nil
}
