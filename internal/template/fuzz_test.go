package template

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzUnpackLayer feeds arbitrary tar streams to the unpacker: whatever it
// accepts or refuses, nothing is written beside the layer's directory, and
// nothing in it is set-id, group/world-writable, a device or a fifo.
func FuzzUnpackLayer(f *testing.F) {
	f.Add(layerTar(f, file("a", "x"), dir("d"), file("d/b", "y"), hardlink("h", "a")))
	f.Add(layerTar(f, symlink("s", "/"), file("s/escape", "x")))
	f.Add(layerTar(f, file("../escape", "x"), file("/abs", "y")))
	f.Add(layerTar(f, entry{name: "suid", body: "x", typ: tar.TypeReg, mode: 0o6777}, entry{name: "dev", typ: tar.TypeChar, mode: 0o666}))
	f.Add(layerTar(f, file(".wh.x", ""), file("d/.wh..wh..opq", ""), symlink("l", ".."), hardlink("m", "l")))
	f.Add(layerTar(f, file(".wh.lib", ""), symlink("lib", "usr/lib"), file(".wh..a", ""), symlink(".a", "/"), file(".a/escape", "x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		top := t.TempDir()
		dst := filepath.Join(top, "layer")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		b := budget{bytes: 1 << 20, entries: 1000}
		_ = unpackLayer(bytes.NewReader(data), dst, "sha256:fuzz", &b, func(string, ...any) {})
		assertOnlyUnder(t, top, "layer")
		err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			m := fi.Mode()
			if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
				t.Errorf("%s: mode %v survived unpacking", p, m)
			}
			if m&fs.ModeSymlink == 0 && m.Perm()&0o022 != 0 {
				t.Errorf("%s: mode %v is group or world writable", p, m)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walking the layer: %v", err)
		}
	})
}
