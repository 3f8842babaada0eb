package template

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one tar header (and body, for regular files) of a test layer.
type entry struct {
	name, link, body string
	typ              byte
	mode             int64
}

func file(name, body string) entry {
	return entry{name: name, body: body, typ: tar.TypeReg, mode: 0o644}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) entry {
	return entry{name: name, link: to, typ: tar.TypeSymlink, mode: 0o777}
}
func hardlink(name, to string) entry {
	return entry{name: name, link: to, typ: tar.TypeLink, mode: 0o644}
}

// layerTar builds an uncompressed layer from entries, in order.
func layerTar(t testing.TB, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing header %q: %v", e.name, err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func unpackInto(t *testing.T, b []byte, lim budget) (string, string, error) {
	t.Helper()
	top := t.TempDir()
	dst := filepath.Join(top, "layer")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := unpackLayer(bytes.NewReader(b), dst, "sha256:test", &lim, func(string, ...any) {})
	return top, dst, err
}

// TestUnpackRefusesHostileEntries builds one malicious layer per attack
// and checks each is refused with an error naming the layer and entry,
// and that nothing lands outside the layer's directory.
func TestUnpackRefusesHostileEntries(t *testing.T) {
	big := budget{bytes: 1 << 20, entries: 100}
	tests := []struct {
		name    string
		entries []entry
		lim     budget
		wantErr string
	}{
		{"dotdot", []entry{file("../escape", "x")}, big, `"../escape": ".." in the path`},
		{"dotdot inside", []entry{dir("a"), file("a/../../escape", "x")}, big, `".." in the path`},
		{"absolute", []entry{file("/escape", "x")}, big, "absolute path"},
		{"write through symlink out", []entry{symlink("a", "/"), file("a/escape", "x")}, big, `goes through the symlink "a"`},
		{"write through symlink in", []entry{dir("d"), symlink("a", "d"), file("a/x", "x")}, big, `goes through the symlink "a"`},
		{"write through dotdot symlink", []entry{symlink("a", ".."), file("a/escape", "x")}, big, `goes through the symlink "a"`},
		{"hard link outside", []entry{hardlink("h", "../../etc/passwd")}, big, "must be a relative path inside the layer"},
		{"hard link absolute", []entry{hardlink("h", "/etc/passwd")}, big, "must be a relative path inside the layer"},
		{"hard link to later entry", []entry{hardlink("h", "later"), file("later", "x")}, big, "not a regular file written earlier"},
		{"hard link through symlink", []entry{symlink("s", "/etc"), hardlink("h", "s/passwd")}, big, `goes through the symlink "s"`},
		{"hard link to symlink", []entry{symlink("s", "/etc/passwd"), hardlink("h", "s")}, big, "not a regular file"},
		{"bomb bytes", []entry{file("a", strings.Repeat("x", 2048))}, budget{bytes: 1024, entries: 100}, "per-pull cap"},
		{"bomb entries", []entry{file("a", ""), file("b", ""), file("c", "")}, budget{bytes: 1024, entries: 2}, "more entries"},
		{"empty whiteout", []entry{file(".wh.", "")}, big, "whiteout names nothing"},
		{"whiteout of the parent", []entry{dir("a"), file("a/.wh...", "")}, big, `whiteout names nothing: ".."`},
		{"whiteout of the directory", []entry{dir("a"), file("a/.wh..", "")}, big, `whiteout names nothing: "."`},
		{"deep name", []entry{file(strings.Repeat("a/", 3000)+"f", "x")}, big, "path longer than 4096 bytes"},
		{"deep hard link", []entry{file("f", "x"), hardlink("h", strings.Repeat("a/", 3000)+"f")}, big, "must be a relative path inside"},
		{"whiteout then symlink out, then through it", []entry{file(".wh.lib", ""), symlink("lib", "/"), file("lib/escape", "x")}, big, `goes through the symlink "lib"`},
		{"whiteout under a new symlink", []entry{symlink("lib", "/etc"), file("lib/.wh.passwd", "")}, big, `goes through the symlink "lib"`},
		{"file under file", []entry{file("f", "x"), file("f/g", "y")}, big, `parent "f" is not a directory`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			top, _, err := unpackInto(t, layerTar(t, tc.entries...), tc.lim)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "layer sha256:test") {
				t.Fatalf("got error %v, want one naming the layer and containing %q", err, tc.wantErr)
			}
			assertOnlyUnder(t, top, "layer")
		})
	}
}

// assertOnlyUnder fails if top holds anything but the directory sub.
func assertOnlyUnder(t *testing.T, top, sub string) {
	t.Helper()
	ents, err := os.ReadDir(top)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != sub {
			t.Errorf("found %q outside the layer's directory", e.Name())
		}
	}
}

// TestUnpackNeutralises checks what is kept but made safe: set-id bits and
// group/world write stripped, sticky kept on directories, device nodes
// and fifos dropped, whiteouts kept as markers, in-layer hard links made.
func TestUnpackNeutralises(t *testing.T) {
	es := []entry{
		{name: "suid", body: "x", typ: tar.TypeReg, mode: 0o4777},
		{name: "sgid", body: "x", typ: tar.TypeReg, mode: 0o2755},
		{name: "tmp", typ: tar.TypeDir, mode: 0o1777},
		{name: "null", typ: tar.TypeChar, mode: 0o666},
		{name: "disk", typ: tar.TypeBlock, mode: 0o660},
		{name: "pipe", typ: tar.TypeFifo, mode: 0o644},
		file("a/.wh.gone", ""),
		file("b/.wh..wh..opq", ""),
		file("orig", "hello"),
		hardlink("copy", "orig"),
		file(".wh.lib", ""),
		symlink("lib", "usr/lib"),
	}
	_, dst, err := unpackInto(t, layerTar(t, es...), budget{bytes: 1 << 20, entries: 100})
	if err != nil {
		t.Fatalf("unpacking: %v", err)
	}
	modes := map[string]fs.FileMode{"suid": 0o755, "sgid": 0o755, "tmp": fs.ModeDir | fs.ModeSticky | 0o755}
	for name, want := range modes {
		fi, err := os.Lstat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode(); got != want {
			t.Errorf("%s: got mode %v, want %v", name, got, want)
		}
	}
	for _, name := range []string{"null", "disk", "pipe"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s: a device node or fifo survived unpacking", name)
		}
	}
	if got, err := os.Readlink(filepath.Join(dst, "lib")); err != nil || got != "usr/lib" {
		t.Errorf("lib: got link %q, %v; want the symlink beside its whiteout", got, err)
	}
	for _, name := range []string{"a/.wh.gone", "b/.wh..wh..opq", ".wh.lib"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err != nil {
			t.Errorf("%s: whiteout marker not kept: %v", name, err)
		}
	}
	a, _ := os.Stat(filepath.Join(dst, "orig"))
	b, err := os.Stat(filepath.Join(dst, "copy"))
	if err != nil || !os.SameFile(a, b) {
		t.Errorf("copy: got %v, want a hard link to orig", err)
	}
}
