package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// imageTree writes a small image's tree: a usr-merged link, a directory,
// a top-level file, names Warden owns or hides, and an /etc with a
// private file and a link.
func imageTree(t *testing.T) string {
	t.Helper()
	img := t.TempDir()
	for p, content := range map[string]string{
		"usr/bin/python3": "#!", "VERSION": "1", ".hidden/x": "x", "home/other/.ssh/id": "key",
		"etc/os-release": "ID=test", "etc/shadow": "root:*:", "etc/passwd": "evil::0:0::/:/bin/sh", "etc/ssl/certs/ca.pem": "pem",
	} {
		p = filepath.Join(img, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(img, "etc/shadow"), 0o640); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin": "usr/bin", "etc/mtab": "/proc/self/mounts"} {
		if err := os.Symlink(target, filepath.Join(img, link)); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestSharedImageTemplate: the root gVisor runs a template on is
// Warden's, never the image's tree: the image's top-level entries bound
// or linked (never Warden's names or hidden ones), its /etc copied with
// its modes and Warden's generated files over it, and the tree left as
// it was.
func TestSharedImageTemplate(t *testing.T) {
	img := imageTree(t)
	base := t.TempDir()
	tp, err := SharedImageTemplate(base, img, testDigest)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/VERSION", "/usr"}; !slices.Equal(tp.Binds, want) || tp.From != img {
		t.Errorf("binds %v from %q, want %v from %q", tp.Binds, tp.From, want, img)
	}
	checks := []struct{ path, want string }{
		{"bin", "link usr/bin"}, {"usr", "dir"}, {"VERSION", "file "}, {".hidden", "missing"},
		{"home/other", "missing"}, {"home/sandbox", "dir"}, {"workspace", "dir"}, {".warden", "dir"},
		{"etc/os-release", "file ID=test"}, {"etc/ssl/certs/ca.pem", "file pem"}, {"etc/mtab", "link /proc/self/mounts"},
		{"var/tmp", "link ../tmp"},
		{"etc/passwd", "file " + GeneratedEtc("sandbox")["passwd"]}, {"etc/resolv.conf", "file " + GeneratedEtc("sandbox")["resolv.conf"]},
	}
	for _, c := range checks {
		if got := describe(filepath.Join(tp.Dir, c.path)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.path, got, c.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(tp.Dir, "etc/shadow")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("etc/shadow: %v, %v; want a copy of mode 0640", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(img, "workspace")); err == nil {
		t.Error("the image's tree has a workspace: it was written")
	}
	if tp.VarTmp {
		t.Error("VarTmp is set for an image without /var")
	}
	if err := os.MkdirAll(filepath.Join(img, "var/tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !ImageVarTmp(img) {
		t.Error("ImageVarTmp is false for an image with a /var/tmp directory")
	}
	again, err := SharedImageTemplate(base, img, testDigest)
	if err != nil || again.Dir != tp.Dir {
		t.Errorf("second call: %q, %v; want the same root %q", again.Dir, err, tp.Dir)
	}
}

func describe(p string) string {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return "missing"
	case fi.Mode()&os.ModeSymlink != 0:
		target, _ := os.Readlink(p)
		return "link " + target
	case fi.IsDir():
		return "dir"
	}
	b, _ := os.ReadFile(p)
	return "file " + string(b)
}

// TestSharedImageTemplateRefuses: a digest that is not sha256 hex, and an
// image whose /etc is past the caps, are refused with one line.
func TestSharedImageTemplateRefuses(t *testing.T) {
	img := imageTree(t)
	big := filepath.Join(img, "etc/big")
	if err := os.WriteFile(big, make([]byte, maxImageEtcBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ digest, want string }{
		{"sha256:../../x", "not sha256"},
		{"md5:" + strings.Repeat("0", 32), "not sha256"},
		{testDigest, "MiB"},
	}
	for _, tt := range tests {
		base := t.TempDir()
		_, err := SharedImageTemplate(base, img, tt.digest)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("digest %q: got %v, want one line with %q", tt.digest, err, tt.want)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 0 {
			t.Errorf("digest %q: left %d entries in the base", tt.digest, len(ents))
		}
	}
}
