package native

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// linkImage writes an OCI layout of one layer: the minimal image's
// files flattened, with its top-level etc and var replaced by links to
// target, as a hostile image could ship them.
func linkImage(t *testing.T, target string) string {
	t.Helper()
	src, _ := templatetest.Image(t, "minimal")
	idx, err := layout.ImageIndexFromPath(src)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		t.Fatalf("the minimal layout's index: %v (%d manifests)", err, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	flat := mutate.Extract(img)
	defer flat.Close()
	tr := tar.NewReader(flat)
	for range 200000 {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.TrimPrefix(h.Name, "./"); n == "etc" || n == "var" || strings.HasPrefix(n, "etc/") || strings.HasPrefix(n, "var/") {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"etc", "var"} {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	out, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(out); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTemplateEtcLinkShowsNoHostFiles: a template whose etc (and var) is
// a link out of its tree, absolute or by .., starts, and its /etc holds
// Warden's generated files alone, never the host directory the link
// names (before the fix the overlay's lower layer followed the link in
// the host's tree, and a var link failed the start with EEXIST).
// The image is one flattened layer: the store refuses a layer that puts
// a link where a lower layer has a directory with entries.
func TestTemplateEtcLinkShowsNoHostFiles(t *testing.T) {
	testhost.RequireRoot(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "host-secret"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var want []string
	for name := range rootfs.GeneratedEtc("sandbox") {
		want = append(want, name)
	}
	slices.Sort(want)
	for name, target := range map[string]string{"abs": host, "rel": strings.Repeat("../", 12) + host} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Import(ctx, linkImage(t, target), "link-"+name); err != nil {
				t.Fatalf("importing the image with links: %v", err)
			}
			tpl, release, err := s.Lease("link-" + name)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			root := spec.Root{Template: tpl.Name, Dir: tpl.Root, Digest: tpl.Digest, Env: tpl.Config.Env}
			sess := startOnTemplate(ctx, t, root, "", "on etc -> "+target)
			defer sess.Close()
			r := execSh(t, sess, "ls -A /etc", 20*time.Second)
			if got := strings.Fields(r.Stdout); !slices.Equal(got, want) {
				t.Errorf("etc -> %s: /etc holds %v (stderr %q), want Warden's generated %v alone", target, got, r.Stderr, want)
			}
		})
	}
}
