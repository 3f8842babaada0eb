package templatetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// layoutImage reads the one image of an OCI layout.
func layoutImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index of %s: %v manifests, err %v; want 1", dir, len(m.Manifests), err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerDigests lists img's layer digests.
func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var d []v1.Hash
	for _, l := range ls {
		h, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		d = append(d, h)
	}
	return d
}

// TestImagesShareTheBaseLayer checks that datasci is minimal's one layer
// plus one more, in the layout and in the docker-save tarball alike.
func TestImagesShareTheBaseLayer(t *testing.T) {
	minLayout, _ := templatetest.Image(t, "minimal")
	dsLayout, dsTar := templatetest.Image(t, "datasci")
	minL := layerDigests(t, layoutImage(t, minLayout))
	dsL := layerDigests(t, layoutImage(t, dsLayout))
	if len(minL) != 1 || len(dsL) != 2 || dsL[0] != minL[0] {
		t.Fatalf("layers: minimal %v, datasci %v; want datasci = minimal's one layer + one", minL, dsL)
	}
	tag, err := name.NewTag(templatetest.Tag("datasci"))
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(dsTar, &tag)
	if err != nil {
		t.Fatalf("reading %s: %v", dsTar, err)
	}
	if got := layerDigests(t, fromTar); len(got) != 2 || got[0] != minL[0] || got[1] != dsL[1] {
		t.Errorf("docker-save layers %v, want %v", got, dsL)
	}
}

// TestRegistryServesAPull pulls every pushed image back with a plain
// go-containerregistry client and compares digests with the layouts'.
func TestRegistryServesAPull(t *testing.T) {
	refs := templatetest.Registry(t)
	for _, n := range templatetest.Names() {
		ref, err := name.ParseReference(refs[n], name.Insecure)
		if err != nil {
			t.Fatalf("%s: parsing %q: %v", n, refs[n], err)
		}
		img, err := remote.Image(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("%s: pulling %s: %v", n, ref, err)
		}
		got, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		dir, _ := templatetest.Image(t, n)
		want, err := layoutImage(t, dir).Digest()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: pulled digest %s, want %s", n, got, want)
		}
		if _, err := remote.Layer(ref.Context().Digest(layerDigests(t, img)[0].String()), remote.WithContext(t.Context())); err != nil {
			t.Errorf("%s: fetching its base layer: %v", n, err)
		}
	}
}

// chartScript imports pandas and matplotlib and renders a PNG, printing its
// first bytes so the test can check it is one.
const chartScript = `
import io, pandas, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
df = pandas.DataFrame({"x": [1, 2, 3], "y": [2, 4, 1]})
ax = df.plot(x="x", y="y")
buf = io.BytesIO()
ax.figure.savefig(buf, format="png")
print(buf.getvalue()[:8].hex(), df["y"].sum())
`

// TestDatasciRendersAChart unpacks the datasci image, flattened, into a
// directory and runs python3 chrooted in it: pandas must import and a PNG
// come out, and the build host's resolver and name stay out of it.
func TestDatasciRendersAChart(t *testing.T) {
	testhost.RequireRoot(t)
	tarTool := testhost.RequireTool(t, "tar")
	dir, _ := templatetest.Image(t, "datasci")
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	unpack := exec.CommandContext(ctx, tarTool, "-x", "-C", root, "--numeric-owner")
	flat := mutate.Extract(layoutImage(t, dir))
	defer flat.Close()
	unpack.Stdin = flat
	if out, err := unpack.CombinedOutput(); err != nil {
		t.Fatalf("unpacking datasci: %v\n%s", err, out)
	}
	for _, f := range []string{"etc/resolv.conf", "etc/hostname"} {
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			t.Errorf("the image holds the build host's /%s", f)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	run := exec.CommandContext(ctx, "chroot", root, "/usr/bin/python3", "-c", chartScript)
	run.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "MPLCONFIGDIR=/tmp"}
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 in datasci: %v\n%s", err, out)
	}
	if got, want := string(out), "89504e470d0a1a0a 7\n"; got != want {
		t.Errorf("output %q, want %q (a PNG's signature and the column's sum)", got, want)
	}
}
