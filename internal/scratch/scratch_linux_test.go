package scratch

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// write makes the files of a tree under dir: a name ending in / is a
// directory, "->target" a symlink, anything else a file of that content.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case name[len(name)-1] == '/':
			err = os.MkdirAll(p, 0o755)
		case len(content) > 2 && content[:2] == "->":
			err = os.Symlink(content[2:], p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func entries(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr) // an in-memory tar read whole just above
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[h.Name] = "->" + h.Linkname
		case tar.TypeReg:
			out[h.Name] = string(data)
		default:
			out[h.Name] = "dir"
		}
	}
}

func TestLayer(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"home/.bashrc": "alias x=y", "home/d/f": "data", "home/passwd": "->/etc/passwd",
		"workspace/out.csv": "1,2", "tmp/junk": "not kept", "shm/junk": "not kept",
	})
	if err := unix.Mkfifo(filepath.Join(dir, "home/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Layer(&b, dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	got := entries(t, b.Bytes())
	want := map[string]string{
		"home/": "dir", "home/sandbox/": "dir", "home/sandbox/.bashrc": "alias x=y", "home/sandbox/d/": "dir",
		"home/sandbox/d/f": "data", "home/sandbox/passwd": "->/etc/passwd", "workspace/": "dir", "workspace/out.csv": "1,2",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %q, want %q", name, got[name], w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: in the layer, want it left out (fifo, /tmp, /dev/shm)", name)
		}
	}
	if err := Layer(io.Discard, dir, 5); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Layer past its cap: got %v, want ErrTooLarge", err)
	}
	files(t, filepath.Join(dir, "workspace"), MaxSeedEntries/100+1, 99)
	if err := Layer(io.Discard, dir, 1<<30); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Layer past the entries a template may seed: got %v, want ErrTooLarge", err)
	}
}

func TestSeed(t *testing.T) {
	tests := []struct {
		name    string
		root    map[string]string
		want    map[string]string // in the scratch
		wantErr bool
	}{
		{"home and workspace", map[string]string{"home/sandbox/.bashrc": "alias", "home/sandbox/d/f": "data",
			"home/sandbox/l": "->/etc/shadow", "workspace/in.csv": "1"},
			map[string]string{"home/.bashrc": "alias", "home/d/f": "data", "home/l": "->/etc/shadow", "workspace/in.csv": "1"}, false},
		{"nothing to seed", map[string]string{"usr/bin/x": "x"}, map[string]string{}, false},
		{"an image's home that leaves the root", map[string]string{"home/sandbox": "->/etc"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := t.TempDir(), t.TempDir()
			write(t, root, tt.root)
			write(t, dir, map[string]string{"home/": "", "workspace/": "", "tmp/": ""})
			err := Seed(dir, root, Kept)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Seed: got %v, want error %v", err, tt.wantErr)
			}
			for name, w := range tt.want {
				p := filepath.Join(dir, name)
				var got string
				if target, err := os.Readlink(p); err == nil {
					got = "->" + target
				} else if b, err := os.ReadFile(p); err == nil {
					got = string(b)
				}
				if got != w {
					t.Errorf("%s: got %q, want %q", name, got, w)
				}
			}
			if names, _ := os.ReadDir(filepath.Join(dir, "home")); len(tt.want) == 0 && len(names) != 0 {
				t.Errorf("home: got %v, want it empty", names)
			}
		})
	}
}

// TestSeeds: a tree with files in home/sandbox or workspace seeds, one
// with neither (or only empty ones) does not.
func TestSeeds(t *testing.T) {
	tests := []struct {
		name  string
		files []string // made under the root; a trailing / makes a directory
		want  bool
	}{
		{"none", []string{"usr/bin/"}, false},
		{"empty places", []string{"home/sandbox/", "workspace/"}, false},
		{"home", []string{"home/sandbox/.bashrc"}, true},
		{"workspace", []string{"workspace/data.csv"}, true},
	}
	for _, tt := range tests {
		root := t.TempDir()
		for _, f := range tt.files {
			p := filepath.Join(root, f)
			dir := filepath.Dir(p)
			if strings.HasSuffix(f, "/") {
				dir = p
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if dir != p {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got := Seeds(root); got != tt.want {
			t.Errorf("%s: Seeds = %v, want %v", tt.name, got, tt.want)
		}
	}
}
