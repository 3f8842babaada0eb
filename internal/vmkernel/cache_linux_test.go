package vmkernel

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testSource = "6.1.192-3"

// kernelDir writes a kernel directory into dir as build.sh installs one,
// built from inputs, and returns its name; edit may change the manifest
// before it is written and the directory named after its key.
func kernelDir(t *testing.T, dir, inputs string, edit func(*manifest)) string {
	t.Helper()
	m := manifest{Key: Key(inputs, testSource), Inputs: inputs, Source: testSource, Built: "2026-12-02T11:40:00Z"}
	if edit != nil {
		edit(&m)
	}
	name := "kernel-" + m.Key
	kdir := filepath.Join(dir, name)
	if err := os.Mkdir(kdir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"manifest.json": fmt.Sprintf(`{"key":%q,"inputs":%q,"source":%q,"built":%q}`+"\n", m.Key, m.Inputs, m.Source, m.Built),
		"vmlinux":       "\x7fELF",
		"config":        "CONFIG_64BIT=y\n",
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(kdir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// TestFind: the kernel of this binary's inputs is found, another build's
// is not, and anything amiss in the cache is an error saying what to do.
func TestFind(t *testing.T) {
	in := Inputs()
	other := strings.Repeat("a", 64)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // "" finds the kernel of in
	}{
		{"one kernel", func(t *testing.T, dir string) { kernelDir(t, dir, in, nil) }, ""},
		{"beside the lock and a build", func(t *testing.T, dir string) {
			kernelDir(t, dir, in, nil)
			mkdir(t, filepath.Join(dir, ".build-x1"), 0o700)
			write(t, filepath.Join(dir, ".lock"), "", 0o644)
		}, ""},
		{"no cache", func(t *testing.T, dir string) { remove(t, dir) }, "no microVM kernel built for this warden: run `make microvm-kernel`"},
		{"empty cache", func(*testing.T, string) {}, "no microVM kernel built"},
		{"another build's", func(t *testing.T, dir string) { kernelDir(t, dir, other, nil) }, "no microVM kernel built"},
		{"another build's beside", func(t *testing.T, dir string) {
			kernelDir(t, dir, other, nil)
			kernelDir(t, dir, in, nil)
		}, ""},
		{"cache writable by others", func(t *testing.T, dir string) { chmod(t, dir, 0o777) }, "not a directory of uid"},
		{"unknown field", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			write(t, filepath.Join(dir, name, "manifest.json"), `{"key":"x","extra":1}`, 0o644)
		}, `unknown field "extra"`},
		{"two values", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			p := filepath.Join(dir, name, "manifest.json")
			b, _ := os.ReadFile(p)
			write(t, p, string(b)+"{}", 0o644)
		}, "more than one JSON value"},
		{"huge manifest", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			write(t, filepath.Join(dir, name, "manifest.json"), strings.Repeat(" ", maxManifest+1), 0o644)
		}, "more than 1024"},
		{"no manifest", func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "kernel-x"), 0o755) }, "manifest.json"},
		{"key not of inputs", func(t *testing.T, dir string) {
			kernelDir(t, dir, in, func(m *manifest) { m.Source = "6.1.1-1" })
		}, "not the hash of its inputs and source"},
		{"key not the name", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, "kernel-"+other)); err != nil {
				t.Fatal(err)
			}
		}, "does not name the directory"},
		{"bad source", func(t *testing.T, dir string) {
			kernelDir(t, dir, in, func(m *manifest) { m.Source = `6.1"; rm` })
		}, "is not a package version"},
		{"bad inputs", func(t *testing.T, dir string) { kernelDir(t, dir, in, func(m *manifest) { m.Inputs = "ABC" }) }, "is not a sha256"},
		{"bad time", func(t *testing.T, dir string) { kernelDir(t, dir, in, func(m *manifest) { m.Built = "today" }) }, "not an RFC 3339 time"},
		{"kernel directory writable by others", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			chmod(t, filepath.Join(dir, name), 0o777)
		}, "not a directory of uid"},
		{"kernel directory a link", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			real := filepath.Join(filepath.Dir(dir), "elsewhere")
			if err := os.Rename(filepath.Join(dir, name), real); err != nil {
				t.Fatal(err)
			}
			symlink(t, real, filepath.Join(dir, name))
		}, "not a directory"},
		{"vmlinux missing", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			remove(t, filepath.Join(dir, name, "vmlinux"))
		}, "vmlinux"},
		{"vmlinux a link", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			p := filepath.Join(dir, name, "vmlinux")
			remove(t, p)
			if err := os.Symlink("/bin/true", p); err != nil {
				t.Fatal(err)
			}
		}, "too many levels of symbolic links"},
		{"vmlinux empty", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			write(t, filepath.Join(dir, name, "vmlinux"), "", 0o644)
		}, "has 0 bytes"},
		{"vmlinux writable by group", func(t *testing.T, dir string) {
			name := kernelDir(t, dir, in, nil)
			chmod(t, filepath.Join(dir, name, "vmlinux"), 0o664)
		}, "writable by it alone"},
		{"too many entries", func(t *testing.T, dir string) {
			for i := range maxEntries + 1 {
				mkdir(t, filepath.Join(dir, fmt.Sprintf(".build-%d", i)), 0o700)
			}
		}, "more than 64 entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "microvm")
			mkdir(t, dir, 0o755)
			tt.setup(t, dir)
			k, err := cache{dir: dir, uid: os.Geteuid()}.find(in)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("find: got %v, want an error with %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("find: got %v, want the kernel", err)
			}
			wantDir := filepath.Join(dir, "kernel-"+Key(in, testSource))
			want := Kernel{
				Vmlinux: filepath.Join(wantDir, "vmlinux"), Config: filepath.Join(wantDir, "config"),
				Key: Key(in, testSource), Source: testSource, Built: time.Date(2026, 12, 2, 11, 40, 0, 0, time.UTC),
				cache: cache{dir: dir, uid: os.Geteuid()}, name: filepath.Base(wantDir),
			}
			if k != want {
				t.Fatalf("find: got %+v, want %+v", k, want)
			}
		})
	}
}

// TestFindNewest: of two builds of the same inputs (two source versions),
// the newer is found.
func TestFindNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "microvm")
	mkdir(t, dir, 0o755)
	in := Inputs()
	kernelDir(t, dir, in, nil)
	kernelDir(t, dir, in, func(m *manifest) {
		m.Source = "6.1.200-1"
		m.Key = Key(m.Inputs, m.Source)
		m.Built = "2026-12-03T00:00:00Z"
	})
	k, err := cache{dir: dir, uid: os.Geteuid()}.find(in)
	if err != nil || k.Source != "6.1.200-1" {
		t.Fatalf("find: got %+v, %v, want the kernel of source 6.1.200-1", k, err)
	}
}

// TestKernelOpen: Open gives the vmlinux Find checked, and checks again:
// a kernel directory swapped for a link or made writable by others after
// Find, or a Kernel Find did not return, is refused.
func TestKernelOpen(t *testing.T) {
	in := Inputs()
	tests := []struct {
		name   string
		change func(t *testing.T, dir, name string)
		want   string // "" opens the vmlinux
	}{
		{"unchanged", func(*testing.T, string, string) {}, ""},
		{"directory swapped for a link", func(t *testing.T, dir, name string) {
			real := filepath.Join(filepath.Dir(dir), "elsewhere")
			if err := os.Rename(filepath.Join(dir, name), real); err != nil {
				t.Fatal(err)
			}
			symlink(t, real, filepath.Join(dir, name))
		}, "not a directory"},
		{"directory writable by others", func(t *testing.T, dir, name string) {
			chmod(t, filepath.Join(dir, name), 0o777)
		}, "not a directory of uid"},
		{"vmlinux swapped for a link", func(t *testing.T, dir, name string) {
			p := filepath.Join(dir, name, "vmlinux")
			remove(t, p)
			symlink(t, "/bin/true", p)
		}, "too many levels of symbolic links"},
		{"pruned", func(t *testing.T, dir, name string) {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "microvm")
			mkdir(t, dir, 0o755)
			name := kernelDir(t, dir, in, nil)
			k, err := cache{dir: dir, uid: os.Geteuid()}.find(in)
			if err != nil {
				t.Fatalf("find: %v", err)
			}
			tt.change(t, dir, name)
			f, err := k.Open()
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Open: got %v, want an error with %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: got %v, want the vmlinux", err)
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			if err != nil || string(b) != "\x7fELF" {
				t.Fatalf("reading the opened vmlinux: got %q, %v, want the kernel's bytes", b, err)
			}
		})
	}
	if _, err := (Kernel{Vmlinux: "/bin/true"}).Open(); err == nil {
		t.Fatal("Open of a Kernel Find did not return: got nil, want an error")
	}
}

// TestInputsMatchBuildScript: Go hashes the embedded inputs exactly as
// build.sh hashes its files, or Find could never find a kernel.
func TestInputsMatchBuildScript(t *testing.T) {
	out, err := exec.Command("bash", "build.sh", "--inputs").Output()
	if err != nil {
		t.Fatalf("build.sh --inputs: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), Inputs(); got != want {
		t.Fatalf("build.sh --inputs: got %s, want %s (Inputs)", got, want)
	}
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	chmod(t, p, mode)
}

func write(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}
