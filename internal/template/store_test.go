//go:build !slim

package template

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testLayer makes a v1.Layer from tar bytes.
func testLayer(t testing.TB, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage stacks layers into an image with a config that sets Env.
func testImage(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/bin"}, WorkingDir: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// baseLayer and topLayer exercise whiteouts and opaque directories.
func baseLayer(t testing.TB) v1.Layer {
	return testLayer(t, layerTar(t, dir("etc"), file("etc/keep", "keep"), file("etc/gone", "gone"),
		dir("opq"), file("opq/old", "old"), symlink("link", "etc/keep"), file("replaced", "file")))
}

// importBase imports a one-layer template (baseLayer's) called name
// into s and returns its record.
func importBase(t *testing.T, s *Store, name string) Info {
	t.Helper()
	lp := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, lp, testImage(t, baseLayer(t)))
	info, err := s.Import(context.Background(), lp, name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func topLayer(t testing.TB) v1.Layer {
	return testLayer(t, layerTar(t, file("etc/.wh.gone", ""), dir("opq"), file("opq/.wh..wh..opq", ""),
		file("opq/new", "new"), dir("replaced"), file("replaced/inside", "x")))
}

// checkRoot checks the union of baseLayer and topLayer.
func checkRoot(t *testing.T, root string) {
	t.Helper()
	want := map[string]string{"etc/keep": "keep", "opq/new": "new", "replaced/inside": "x", "link": "keep"}
	for p, body := range want {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(b) != body {
			t.Errorf("%s: got %q, %v; want %q", p, b, err, body)
		}
	}
	for _, p := range []string{"etc/gone", "etc/.wh.gone", "opq/old", "opq/.wh..wh..opq"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s: present in the root, want it hidden by a whiteout", p)
		}
	}
}

// TestImportFormats imports one image as an OCI layout directory, a tar
// of it and a docker save archive: the roots are right, and only the
// first import unpacks (the others share its layers, hard-linked).
func TestImportFormats(t *testing.T) {
	s := openStore(t, Options{})
	img := testImage(t, baseLayer(t), topLayer(t))
	dir := t.TempDir()
	lp := filepath.Join(dir, "layout")
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	save := filepath.Join(dir, "save.tar")
	tag, err := name.NewTag("test/img:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(save, tag, img); err != nil {
		t.Fatal(err)
	}
	ociTar := filepath.Join(dir, "layout.tar")
	tarDir(t, lp, ociTar)
	wantUnpacked := map[string]int{"fromdir": 2, "fromsave": 0, "fromtar": 0}
	var roots []string
	for _, tc := range []struct{ name, path string }{{"fromdir", lp}, {"fromsave", save}, {"fromtar", ociTar}} {
		info, err := s.Import(context.Background(), tc.path, tc.name)
		if err != nil {
			t.Fatalf("importing %s: %v", tc.name, err)
		}
		if info.Unpacked != wantUnpacked[tc.name] {
			t.Errorf("%s: unpacked %d layers, want %d", tc.name, info.Unpacked, wantUnpacked[tc.name])
		}
		tpl, err := s.Get(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		checkRoot(t, tpl.Root)
		if tpl.Config.WorkingDir != "/work" || len(tpl.Layers) != 2 {
			t.Errorf("%s: got config %+v and %d layers, want workdir /work and 2", tc.name, tpl.Config, len(tpl.Layers))
		}
		roots = append(roots, tpl.Root)
	}
	a, _ := os.Stat(filepath.Join(roots[0], "etc/keep"))
	b, _ := os.Stat(filepath.Join(roots[1], "etc/keep"))
	if !os.SameFile(a, b) {
		t.Errorf("etc/keep: two templates with the same layer hold two copies, want one shared file")
	}
	if _, err := s.Import(context.Background(), lp, "fromdir"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("importing over an existing name: got %v, want an error saying it exists", err)
	}
}

// tarDir writes the tree at dir as the tar file out.
func tarDir(t *testing.T, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// serveRegistry starts an in-process registry on loopback and returns its
// host:port, with h wrapping it when not nil.
func serveRegistry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t testing.TB, ref string, img v1.Image, opts ...remote.Option) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
}

// TestPullSharesLayers pulls two images sharing a base layer: the second
// unpacks only its own layer.
func TestPullSharesLayers(t *testing.T) {
	host := serveRegistry(t, nil)
	base := baseLayer(t)
	push(t, host+"/one:1", testImage(t, base, topLayer(t)))
	push(t, host+"/two:latest", testImage(t, base, testLayer(t, layerTar(t, file("two", "2")))))
	s := openStore(t, Options{})
	var progress bytes.Buffer
	one, err := s.Pull(context.Background(), host+"/one:1", "", PullOptions{Progress: &progress, Keychain: authn.NewMultiKeychain()})
	if err != nil {
		t.Fatalf("pulling: %v", err)
	}
	if one.Name != "one-1" || one.Unpacked != 2 || one.Reused != 0 {
		t.Errorf("got %s unpacked %d reused %d, want one-1 unpacked 2 reused 0", one.Name, one.Unpacked, one.Reused)
	}
	checkRoot(t, one.Root)
	two, err := s.Pull(context.Background(), host+"/two", "", PullOptions{Progress: &progress})
	if err != nil {
		t.Fatalf("pulling: %v", err)
	}
	if two.Name != "two" || two.Unpacked != 1 || two.Reused != 1 {
		t.Errorf("got %s unpacked %d reused %d, want two unpacked 1 reused 1", two.Name, two.Unpacked, two.Reused)
	}
	if !strings.Contains(progress.String(), "already stored") {
		t.Errorf("progress %q does not report the shared layer", progress.String())
	}
}

// TestPullAuthFailure checks a registry refusing the client names the fix.
func TestPullAuthFailure(t *testing.T) {
	host := serveRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
		})
	})
	s := openStore(t, Options{})
	_, err := s.Pull(context.Background(), host+"/private:1", "", PullOptions{})
	if err == nil || !strings.Contains(err.Error(), "docker login") {
		t.Fatalf("got %v, want an error naming docker login", err)
	}
	t.Logf("refused: %v", err)
}

// TestPullCapLeavesNothing checks a pull over the size cap fails, both on
// declared sizes and on unpacked bytes, and leaves no layer or temp file.
func TestPullCapLeavesNothing(t *testing.T) {
	host := serveRegistry(t, nil)
	small := testLayer(t, layerTar(t, file("small", "s")))
	bomb := testLayer(t, layerTar(t, file("zeros", strings.Repeat("\x00", 1<<20))))
	push(t, host+"/bomb:1", testImage(t, small, bomb))
	s := openStore(t, Options{MaxBytes: 64 << 10})
	_, err := s.Pull(context.Background(), host+"/bomb:1", "", PullOptions{})
	if err == nil || !strings.Contains(err.Error(), "per-pull cap") {
		t.Fatalf("got %v, want the per-pull cap error", err)
	}
	t.Logf("refused: %v", err)
	for _, d := range []string{"layers", "templates", "tmp"} {
		if ents, _ := os.ReadDir(filepath.Join(s.Dir(), d)); len(ents) != 0 {
			t.Errorf("%s: a failed pull left %d entries", d, len(ents))
		}
	}
}

// TestLayerDigestMismatch swaps a layer's blob in an OCI layout for
// another valid layer: the import is refused naming the layer, and
// leaves nothing.
func TestLayerDigestMismatch(t *testing.T) {
	img := testImage(t, baseLayer(t))
	lp := filepath.Join(t.TempDir(), "layout")
	writeLayout(t, lp, img)
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	evil, _ := testLayer(t, layerTar(t, file("evil", "x"))).Compressed()
	b, _ := io.ReadAll(evil)
	if err := os.WriteFile(filepath.Join(lp, "blobs", "sha256", d.Hex), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Options{})
	_, err := s.Import(context.Background(), lp, "evil")
	if err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("got %v, want a digest mismatch", err)
	}
	t.Logf("refused: %v", err)
	for _, d := range []string{"layers", "templates", "tmp"} {
		if ents, _ := os.ReadDir(filepath.Join(s.Dir(), d)); len(ents) != 0 {
			t.Errorf("%s: a refused import left %d entries", d, len(ents))
		}
	}
}

// TestCommitRemoveGC commits a layer on a base, removes both, and
// checks GC frees every layer.
func TestCommitRemoveGC(t *testing.T) {
	s := openStore(t, Options{})
	base := importBase(t, s, "base")
	change := layerTar(t, file("etc/.wh.keep", ""), file("added", "new"))
	c, err := s.Commit("base", base.Digest, bytes.NewReader(change), "child", []string{Everyone})
	if err != nil {
		t.Fatalf("committing: %v", err)
	}
	if c.Digest == base.Digest || len(c.Layers) != 2 || c.Unpacked != 1 || c.Config.WorkingDir != "/work" {
		t.Errorf("got %+v, want a new digest, 2 layers, 1 unpacked, the base's config", c)
	}
	if b, err := os.ReadFile(filepath.Join(c.Root, "added")); err != nil || string(b) != "new" {
		t.Errorf("added: got %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(c.Root, "etc/keep")); err == nil {
		t.Errorf("etc/keep: present in the child, want it whited out")
	}
	if _, err := os.Lstat(filepath.Join(base.Root, "etc/keep")); err != nil {
		t.Errorf("etc/keep: gone from the base: %v", err)
	}
	if rep, _ := s.GC(); rep.Layers != 0 {
		t.Errorf("GC with both templates: removed %d layers, want 0", rep.Layers)
	}
	for _, n := range []string{"base", "child"} {
		if err := s.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := s.GC()
	if err != nil || rep.Layers != 2 || rep.BytesFreed == 0 {
		t.Errorf("GC: got %+v, %v; want 2 layers and some bytes freed", rep, err)
	}
	if chk := s.Check(); chk.Templates != 0 || chk.Layers != 0 || len(chk.Problems) != 0 {
		t.Errorf("Check after GC: got %+v, want an empty store", chk)
	}
}

// TestCommitRefusesAReplacedBase: a commit names the digest its layer
// was made on; a base replaced under its name since (another digest), or
// a record without one, is refused and nothing is stored.
func TestCommitRefusesAReplacedBase(t *testing.T) {
	s := openStore(t, Options{})
	importBase(t, s, "base")
	change := layerTar(t, file("added", "new"))
	for _, digest := range []string{"sha256:" + strings.Repeat("0", 64), ""} {
		_, err := s.Commit("base", digest, bytes.NewReader(change), "child", []string{Everyone})
		if err == nil || !strings.Contains(err.Error(), "replaced since") {
			t.Errorf("commit on digest %q: got %v, want a refusal saying the base was replaced", digest, err)
		}
		if _, err := s.Get("child"); err == nil {
			t.Errorf("commit on digest %q: the child was stored", digest)
		}
	}
}
