package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestImageEtcNeverShowsTheHost: an image whose etc is not a directory of
// its own (a link out of the tree, absolute or by .., a file, nothing)
// gets Warden's generated files alone at /etc; a real one is the lower
// layer under them. Before the fix, a link's target (a host directory)
// was the overlay's lower layer.
func TestImageEtcNeverShowsTheHost(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "host-secret"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	var generated []string
	for name := range GeneratedEtc("box") {
		generated = append(generated, name)
	}
	tests := []struct {
		name string
		etc  func(img string) error
		want []string
	}{
		{"absolute link", func(img string) error { return os.Symlink(host, filepath.Join(img, "etc")) }, generated},
		{"relative link", func(img string) error {
			return os.Symlink("../../../../../../../../../../.."+host, filepath.Join(img, "etc"))
		}, generated},
		{"file", func(img string) error { return os.WriteFile(filepath.Join(img, "etc"), []byte("x"), 0o644) }, generated},
		{"absent", func(string) error { return nil }, generated},
		{"directory", func(img string) error {
			if err := os.Mkdir(filepath.Join(img, "etc"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(img, "etc/os-release"), []byte("ID=test"), 0o644)
		}, append([]string{"os-release"}, generated...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			img := filepath.Join(root, scratchDir, imageDir)
			for _, d := range []string{img, filepath.Join(root, "etc")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.etc(img); err != nil {
				t.Fatal(err)
			}
			var got []string
			err := testhost.InMountNS(t, func() error {
				if err := imageEtc(root, img, "box"); err != nil {
					return err
				}
				ents, err := os.ReadDir(filepath.Join(root, "etc"))
				for _, e := range ents {
					got = append(got, e.Name())
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			slices.Sort(tt.want)
			if !slices.Equal(got, tt.want) {
				t.Errorf("/etc holds %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBindImageVar: an image's top-level var of any kind gives a root:
// a link or a file is shown as it is (before the fix, makeVar then failed
// with EEXIST), an absent one is makeVar's, a directory is bound.
func TestBindImageVar(t *testing.T) {
	tests := []struct {
		name string
		make func(img string) error
		want string
	}{
		{"absolute link", func(img string) error { return os.Symlink("/var", filepath.Join(img, "var")) }, "link /var"},
		{"relative link", func(img string) error { return os.Symlink("../../../../var", filepath.Join(img, "var")) }, "link ../../../../var"},
		{"file", func(img string) error { return os.WriteFile(filepath.Join(img, "var"), nil, 0o644) }, "file "},
		{"absent", func(string) error { return nil }, "dir"},
		{"directory", func(img string) error { return os.MkdirAll(filepath.Join(img, "var/tmp"), 0o755) }, "dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, root := t.TempDir(), t.TempDir()
			for _, d := range []string{scratchDir, "etc", "tmp"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.make(img); err != nil {
				t.Fatal(err)
			}
			var got string
			err := testhost.InMountNS(t, func() error {
				fd, err := unix.Open(img, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				defer unix.Close(fd)
				err = bindImage(root, Options{Image: &ImageRoot{FD: fd}, Hostname: "box"})
				got = describe(filepath.Join(root, "var"))
				return err
			})
			if err != nil {
				t.Fatalf("bindImage: %v", err)
			}
			if got != tt.want {
				t.Errorf("/var: got %q, want %q", got, tt.want)
			}
		})
	}
}
