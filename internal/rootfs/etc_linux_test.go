package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

func TestSharedEtcWritesOnce(t *testing.T) {
	base := filepath.Join(t.TempDir(), "etc")
	first, err := SharedEtc(base, "box", false, nil)
	if err != nil {
		t.Fatalf("SharedEtc: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(first.Dir, "hostname")); err != nil || string(got) != "box\n" {
		t.Errorf("hostname = %q, %v; want %q", got, err, "box\n")
	}
	for _, name := range first.Binds {
		if !slices.Contains(EtcAllowlist, name) {
			t.Errorf("bind %q is not on the allowlist", name)
		}
		if _, err := os.Lstat(filepath.Join(first.Dir, name)); err != nil {
			t.Errorf("bind %q has no mount point: %v", name, err)
		}
	}
	if fi, err := os.Stat(first.Dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("template mode = %v, %v; want 0755", fi.Mode().Perm(), err)
	}
	again, err := SharedEtc(base, "box", false, nil)
	if err != nil || again.Dir != first.Dir {
		t.Errorf("second SharedEtc = %q, %v; want %q", again.Dir, err, first.Dir)
	}
	other, err := SharedEtc(base, "other", false, nil)
	if err != nil || other.Dir == first.Dir {
		t.Errorf("another hostname got %q, %v; want a template of its own", other.Dir, err)
	}
	entries, _ := os.ReadDir(base)
	if len(entries) != 2 {
		t.Errorf("base holds %d entries, want the 2 templates (no temporary left)", len(entries))
	}
}

func TestSharedEtcLeavesOutPrivateFiles(t *testing.T) {
	base := t.TempDir()
	tmpl, err := SharedEtc(filepath.Join(base, "etc"), "box", false, nil)
	if err != nil {
		t.Fatalf("SharedEtc: %v", err)
	}
	for _, name := range []string{"shadow", "ssl/private", "machine-id", "ssh"} {
		if _, err := os.Lstat(filepath.Join(tmpl.Dir, name)); err == nil {
			t.Errorf("template holds /etc/%s", name)
		}
	}
}

func TestSharedEtcRefusesUnsafeBase(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	if err := os.Mkdir(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign")
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(foreign, 1234, 1234); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, base, want string
	}{
		{"writable by others", loose, "written by others"},
		{"a link", link, "not a directory"},
		{"a file", file, "not a directory"},
		{"another user's", foreign, "belongs to uid 1234"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.base == foreign && os.Geteuid() != 0 {
				t.Skip("needs root to give a directory away")
			}
			_, err := SharedEtc(tt.base, "box", false, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SharedEtc(%s) = %v; want an error saying %q", tt.name, err, tt.want)
			}
		})
	}
}

func TestSharedEtcIgnoresUmask(t *testing.T) {
	for _, ownMounts := range []bool{false, true} {
		t.Run(fmt.Sprintf("ownMounts=%v", ownMounts), func(t *testing.T) {
			if ownMounts {
				testhost.RequireRoot(t)
			}
			old := unix.Umask(0o077)
			defer unix.Umask(old)
			base := filepath.Join(t.TempDir(), "etc")
			tmpl, err := SharedEtc(base, "box", ownMounts, nil)
			if err != nil {
				t.Fatalf("SharedEtc: %v", err)
			}
			if ownMounts {
				unmountAll(t, tmpl.Dir)
			}
			for _, tt := range []struct {
				path string
				want os.FileMode
			}{
				{base, 0o755}, {tmpl.Dir, 0o755}, {filepath.Join(tmpl.Dir, "passwd"), 0o644},
				{filepath.Join(tmpl.Dir, "ssl"), 0o755},
			} {
				if fi, err := os.Stat(tt.path); err != nil || fi.Mode().Perm() != tt.want {
					t.Errorf("mode of %s = %v, %v; want %v", tt.path, fi.Mode().Perm(), err, tt.want)
				}
			}
		})
	}
}

func TestSharedEtcReplacesBadModes(t *testing.T) {
	base := filepath.Join(t.TempDir(), "etc")
	first, err := SharedEtc(base, "box", false, nil)
	if err != nil {
		t.Fatalf("SharedEtc: %v", err)
	}
	passwd := filepath.Join(first.Dir, "passwd")
	if err := os.Chmod(passwd, 0o600); err != nil {
		t.Fatal(err)
	}
	checked.mark("") // as if a second had passed since the last look
	if again, err := SharedEtc(base, "box", false, nil); err != nil || again.Dir != first.Dir {
		t.Fatalf("SharedEtc after a chmod = %q, %v; want %q", again.Dir, err, first.Dir)
	}
	if fi, err := os.Stat(passwd); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode of %s = %v, %v; want a rewritten template's 0644", passwd, fi.Mode().Perm(), err)
	}
}

func TestSharedEtcReplacesDamaged(t *testing.T) {
	base := filepath.Join(t.TempDir(), "etc")
	first, err := SharedEtc(base, "box", false, nil)
	if err != nil {
		t.Fatalf("SharedEtc: %v", err)
	}
	lost := filepath.Join(first.Dir, "passwd")
	if len(first.Binds) > 0 {
		lost = filepath.Join(first.Dir, first.Binds[0])
	}
	if err := os.RemoveAll(lost); err != nil {
		t.Fatal(err)
	}
	checked.mark("") // as if a second had passed since the last look
	again, err := SharedEtc(base, "box", false, nil)
	if err != nil || again.Dir != first.Dir {
		t.Fatalf("SharedEtc after damage = %q, %v; want %q", again.Dir, err, first.Dir)
	}
	if _, err := os.Lstat(lost); err != nil {
		t.Errorf("%s was not restored: %v", lost, err)
	}
	if entries, _ := os.ReadDir(base); len(entries) != 1 {
		t.Errorf("base holds %d entries, want the one template", len(entries))
	}
}

func TestClassifyNeedsReachableParents(t *testing.T) {
	dir := t.TempDir()
	// t.TempDir's directories let no one else through.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	closed := filepath.Join(dir, "closed")
	open := filepath.Join(dir, "open")
	for _, d := range []string{closed, open} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want entryKind
	}{
		{filepath.Join(open, "f"), entryCopied},
		{filepath.Join(closed, "f"), entrySkipped},
	} {
		if e, _ := classify(tt.path, searchable{}); e.kind != tt.want {
			t.Errorf("classify(%s) = %v, want %v", tt.path, e.kind, tt.want)
		}
	}
}
