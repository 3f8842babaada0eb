package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestImageAndTemplateRefused: --image and a template both name the
// box's root, so a box given both is refused before any engine call.
func TestImageAndTemplateRefused(t *testing.T) {
	r := &Runtime{Image: "debian:12"}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone},
		Root: spec.Root{Template: "minimal", Dir: "/var/lib/warden/templates/templates/minimal/rootfs", Digest: "sha256:" + strings.Repeat("a", 64)}}
	_, err := r.Start(context.Background(), s)
	if err == nil || !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "--image") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one line refusing --image with a template", err)
	}
}

// TestPackTree packs a hostile tree: links are packed as links, never
// followed; a file linked twice is packed once; set-id bits are dropped
// and every entry is root's.
func TestPackTree(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644))
	must(os.Chmod(filepath.Join(dir, "f"), 0o4755))
	must(os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "g")))
	must(os.Symlink("/etc/shadow", filepath.Join(dir, "l")))
	must(os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(os.Chmod(filepath.Join(dir, "d"), 0o777|os.ModeSticky))
	var buf bytes.Buffer
	must(packTree(&buf, dir, true))
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got[h.Name] = h
	}
	if h := got["f"]; h == nil || h.Typeflag != tar.TypeReg || h.Size != 4 || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
		t.Errorf("f: got %+v, want a 4-byte file of mode 0755 (set-uid dropped), owned by 0:0", h)
	}
	if h := got["g"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "f" {
		t.Errorf("g: got %+v, want a hard link to f", h)
	}
	if h := got["l"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/etc/shadow" || h.Size != 0 {
		t.Errorf("l: got %+v, want the symlink itself, not its target", h)
	}
	if h := got["d/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("d/: got %+v, want a directory of mode 01777", h)
	}
}

// liveEngine skips (fails under WARDEN_CI=1) without root and a Docker
// engine.
func liveEngine(t *testing.T) {
	t.Helper()
	testhost.RequireRoot(t)
	e, err := NewEngine()
	if err == nil {
		err = e.Ping(t.Context())
	}
	if err != nil {
		testhost.SkipOrFail(t, "no Docker engine (make dockerd starts one): "+err.Error())
	}
}

// startBox starts a box of s, closed when t ends; the first box on a
// template imports its image, which may take minutes.
func startBox(t *testing.T, s spec.Spec) *agent.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sess, err := (&Runtime{}).Start(ctx, s)
	if err != nil {
		t.Fatalf("starting a box on template %q: %v", s.Root.Template, err)
	}
	t.Cleanup(func() {
		if err := sess.Close(); err != nil {
			t.Errorf("closing the box: %v", err)
		}
	})
	return sess
}

// templateRoot is templatetest.Root for a Docker box: when the test
// ends, after its boxes closed, it removes the image (about 1 GB for
// datasci) the first box made of the template, as `warden template gc`
// would once the test's store is gone, so runs leave no image behind.
func templateRoot(t *testing.T, imageName string) spec.Root {
	t.Helper()
	return cleanedRoot(t, func() spec.Root { return templatetest.Root(t, imageName) })
}

// cleanedRoot is the root mk returns, whose image is removed (and
// checked removed) when the test ends, after its boxes close.
func cleanedRoot(t *testing.T, mk func() spec.Root) spec.Root {
	t.Helper()
	var root spec.Root
	t.Cleanup(func() { // registered first, so it runs after the boxes close
		if root.Digest == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		removed, err := RemoveTemplateImages(ctx, storeOf(root.Dir), func(string) bool { return false })
		if err != nil || !slices.Contains(removed, root.Digest) {
			t.Errorf("removing the test template's image: removed %q, %v; want %s removed", removed, err, root.Digest)
		}
	})
	root = mk()
	return root
}

// uidOf is the box's leased host uid, the owner of its workspace.
func uidOf(t *testing.T, sess *agent.Session) string {
	t.Helper()
	r, err := sess.Exec(t.Context(), agent.ExecSpec{Command: []string{"stat", "-c", "%u", "/workspace"}}, agent.IO{})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("stat /workspace: %v, %+v", err, r)
	}
	return strings.TrimSpace(r.Stdout)
}

// TestTemplateRoot runs a container on a template: its root is the
// image made from the template's tree, read-only, with Warden's user,
// host names and resolver in /etc and the writable scratch.
func TestTemplateRoot(t *testing.T) {
	liveEngine(t)
	root := templateRoot(t, "minimal")
	sess := startBox(t, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root})
	cases := []struct{ name, script, want string }{
		{"the image's files, not the host's", "test -e /usr/sbin/dockerd -o -e /usr/bin/dockerd && echo host || echo image", "image"},
		{"the image's python", "python3 -c 'import sys; print(sys.prefix)'", "/usr"},
		{"Warden's user", "echo $USER $HOME; id -u", "sandbox /home/sandbox\n" + uidOf(t, sess)},
		{"Warden's /etc files", "cat /etc/hostname /etc/resolv.conf; grep -c . /etc/passwd", "sandbox\n# The sandbox resolves no names itself.\n3"},
		{"read-only root", "for p in /x /usr/x /etc/x /etc/passwd; do touch $p 2>/dev/null && echo wrote $p; done; echo done", "done"},
		{"writable scratch", "echo a > /workspace/f && echo b > /tmp/f && echo c > ~/f && cat /workspace/f /tmp/f ~/f | tr -d '\\n'", "abc"},
		{"/var/tmp is /tmp", "echo v > /var/tmp/v && cat /tmp/v", "v"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", c.script}}, agent.IO{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(r.Stdout); r.ExitCode != 0 || got != c.want {
				t.Errorf("%s:\ngot  exit %d, %q (stderr %q)\nwant exit 0, %q", c.script, r.ExitCode, got, r.Stderr, c.want)
			}
		})
	}
}

// TestTemplateCharts: a session on the datasci template imports pandas
// and returns a matplotlib chart through the persistent interpreter.
func TestTemplateCharts(t *testing.T) {
	liveEngine(t)
	root := templateRoot(t, "datasci")
	l := spec.DefaultLimits
	l.Timeout = 3 * time.Minute
	templatetest.CheckChart(t, startBox(t, spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root}), root)
}

// TestRemoveTemplateImages: gc removes the image of a template its store
// no longer has, and never one of another store's.
func TestRemoveTemplateImages(t *testing.T) {
	liveEngine(t)
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	gone := "sha256:" + strings.Repeat("e", 64)
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	if err := tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 2}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte("x\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := TemplateRepo + ":" + strings.Repeat("e", 64)
	store := t.TempDir()
	if err := e.Import(t.Context(), TemplateRepo, strings.Repeat("e", 64), &tarball, "LABEL "+TemplateLabel+"=\""+gone+"\" "+StoreLabel+"=\""+store+"\""); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemplateImages(t.Context(), store+"-other", func(string) bool { return false })
	if err != nil || len(removed) != 0 {
		t.Errorf("gc of another store = %v, %v; want nothing removed", removed, err)
	}
	removed, err = RemoveTemplateImages(t.Context(), store, func(d string) bool { return d != gone })
	if err != nil || !slices.Equal(removed, []string{gone}) {
		t.Errorf("RemoveTemplateImages = %v, %v; want [%s], nil", removed, err, gone)
	}
	if ok, err := e.HasImage(t.Context(), ref); err != nil || ok {
		t.Errorf("after gc: HasImage(%s) = %v, %v; want false", ref, ok, err)
	}
}

// TestTemplateTag: one digest in two stores gets two image tags (before,
// both used the digest's alone, so one store's gc removed the image the
// other's template ran on), the same store always the same, each a valid
// Docker tag that starts with the digest's hex.
func TestTemplateTag(t *testing.T) {
	hex := strings.Repeat("a", 64)
	validTag := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	a, b := templateTag(hex, "/var/lib/warden"), templateTag(hex, "/srv/other-warden")
	if a == b {
		t.Errorf("stores /var/lib/warden and /srv/other-warden: both got tag %q, want different tags", a)
	}
	if again := templateTag(hex, "/var/lib/warden"); again != a {
		t.Errorf("the same store: got %q then %q, want one tag", a, again)
	}
	for _, tag := range []string{a, b} {
		if !validTag.MatchString(tag) || !strings.HasPrefix(tag, hex+"-") {
			t.Errorf("tag %q: want a valid Docker tag starting with %q", tag, hex+"-")
		}
	}
}

// TestTemplateSeeded: a box on a committed template starts with the
// template's home and /workspace, copied into its host-side scratch before
// it starts: readable (its private files too), writable.
func TestTemplateSeeded(t *testing.T) {
	liveEngine(t)
	root := cleanedRoot(t, func() spec.Root { return templatetest.Seeded(t, "minimal") })
	sess := startBox(t, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root})
	templatetest.CheckSeeded(t, sess)
}
