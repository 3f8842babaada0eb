package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestPickImage: without --image the boxes run Warden's root image,
// imported only when the engine lacks it; an --image is checked for
// volumes and used as it is; each engine failure is the start's error.
func TestPickImage(t *testing.T) {
	tmpl := rootfs.Template{Dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(tmpl.Dir, "passwd"), []byte("root:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := rootImage(context.Background(), newMemEngine(), tmpl)
	if err != nil || !strings.HasPrefix(ref, rootRepo+":") {
		t.Fatalf("rootImage = %q, %v, want %s:<tag>", ref, err, rootRepo)
	}
	errEngine := errors.New("engine says no")
	tests := []struct {
		name, image string
		setup       func(f *memEngine)
		want        string // the image, or the error's text
		wantImports []string
	}{
		{"root image present", "", func(f *memEngine) { f.images[ref] = true }, ref, nil},
		{"root image missing", "", nil, ref, []string{ref}},
		{"engine cannot say", "", func(f *memEngine) { f.setFail("HasImage", errEngine) }, "engine says no", nil},
		{"import fails", "", func(f *memEngine) { f.setFail("Import", errEngine) }, "importing " + ref + ": engine says no", nil},
		{"image without volumes", "python:3.12", nil, "python:3.12", nil},
		{"image with volumes", "postgres:16", func(f *memEngine) { f.volumes = []string{"/var/lib/postgresql/data"} },
			"--image postgres:16 declares volumes [/var/lib/postgresql/data]", nil},
		{"image not inspectable", "nosuch:1", func(f *memEngine) { f.setFail("ImageVolumes", errEngine) }, "inspecting --image nosuch:1: engine says no", nil},
	}
	for _, tt := range tests {
		f := newMemEngine()
		if tt.setup != nil {
			tt.setup(f)
		}
		r := &Runtime{Image: tt.image, engine: f}
		got, err := r.pickImage(context.Background(), tmpl)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: pickImage = %q, want %q", tt.name, got, tt.want)
		}
		if !slices.Equal(f.imported, tt.wantImports) {
			t.Errorf("%s: imported %v, want %v", tt.name, f.imported, tt.wantImports)
		}
	}
}

// TestRootImageTag: the root image's tag is its content's: the same
// template gives the same image, a changed one a new image.
func TestRootImageTag(t *testing.T) {
	tmpl := rootfs.Template{Dir: t.TempDir()}
	p := filepath.Join(tmpl.Dir, "hosts")
	refs := make([]string, 3)
	for i, content := range []string{"127.0.0.1 localhost\n", "127.0.0.1 localhost\n", "127.0.0.1 sandbox\n"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if refs[i], err = rootImage(context.Background(), newMemEngine(), tmpl); err != nil {
			t.Fatal(err)
		}
	}
	if refs[0] != refs[1] || refs[1] == refs[2] {
		t.Errorf("refs of same, same, changed template = %v, want the first two equal and the third different", refs)
	}
}

// TestRootImageLazy: preparing the backend imports no image, so a Warden
// whose boxes all run on templates never imports Warden's root image;
// the first box on the host's root imports it, and later ones reuse it.
func TestRootImageLazy(t *testing.T) {
	testhost.RequireRoot(t) // the docker backend's state directory is root's
	f := newMemEngine()
	r := &Runtime{engine: f}
	if err := r.prepare(context.Background()); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if len(f.imported) != 0 || f.count("HasImage") != 0 {
		t.Fatalf("prepare imported %v (%d lookups), want no image", f.imported, f.count("HasImage"))
	}
	for range 2 {
		ref, err := r.hostImage(context.Background())
		if err != nil || !strings.HasPrefix(ref, rootRepo+":") {
			t.Fatalf("hostImage = %q, %v, want %s:<tag>", ref, err, rootRepo)
		}
	}
	if len(f.imported) != 1 || !strings.HasPrefix(f.imported[0], rootRepo+":") {
		t.Errorf("imported %v, want the root image once", f.imported)
	}
}

// TestRootImageRetried: a failed import of the root image is not kept
// (the next box on the host's root tries again), and the import outlives
// the request that started it (a canceled first request leaves the
// image to the next).
func TestRootImageRetried(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the docker backend's state directory is root's")
	}
	tests := []struct {
		name  string
		first func(f *memEngine) context.Context
		fails bool // the first hostImage must fail (a canceled one may not)
	}{
		{"import failed", func(f *memEngine) context.Context {
			f.setFail("Import", errors.New("engine busy"))
			return context.Background()
		}, true},
		{"request canceled", func(*memEngine) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, false},
	}
	for _, tt := range tests {
		f := newMemEngine()
		f.ctxImport = true
		r := &Runtime{engine: f}
		if _, err := r.hostImage(tt.first(f)); tt.fails && err == nil {
			t.Fatalf("%s: the first hostImage succeeded, want its error", tt.name)
		}
		f.setFail("Import", nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ref, err := r.hostImage(ctx)
		cancel()
		if err != nil || !strings.HasPrefix(ref, rootRepo+":") {
			t.Errorf("%s: the second hostImage = %q, %v, want %s:<tag>", tt.name, ref, err, rootRepo)
		}
	}
}
