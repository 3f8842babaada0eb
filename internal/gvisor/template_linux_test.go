package gvisor

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// requireRunsc skips (fails under WARDEN_CI=1) where boxes cannot start.
func requireRunsc(t *testing.T) {
	t.Helper()
	if cgoOn {
		t.Skip("live gVisor boxes need a test binary built with CGO_ENABLED=0 (make test runs them so)")
	}
	if os.Geteuid() != 0 {
		testhost.SkipOrFail(t, "gVisor boxes need root")
	}
	if _, err := FindRunsc(""); err != nil {
		testhost.SkipOrFail(t, "no runsc: "+err.Error())
	}
}

// treeEntries counts every entry under dir.
func treeEntries(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, _ fs.DirEntry, err error) error {
		n++
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startBox starts a box of s, closed when t ends.
func startBox(t *testing.T, s spec.Spec) *agent.Session {
	t.Helper()
	return startBoxOn(t, &Runtime{}, s)
}

// startBoxOn starts a box of s with r, closed when t ends.
func startBoxOn(t *testing.T, r *Runtime, s spec.Spec) *agent.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := r.Start(ctx, s)
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

// templateRoot is templatetest.Root for a gVisor box: when the test ends,
// after its boxes closed, it removes the shared root (StateDir/img-…) a
// box wrote for the template, as `warden template gc` would, so tests
// leave no root in /run that no store holds. A root another box still
// uses is kept (RemoveTemplateRoots reads the boxes' bundles).
func templateRoot(t *testing.T, imageName string) spec.Root {
	t.Helper()
	return cleanedRoot(t, func() spec.Root { return templatetest.Root(t, imageName) })
}

// cleanedRoot is the root mk returns, whose gVisor root is removed
// when the test ends, after its boxes close.
func cleanedRoot(t *testing.T, mk func() spec.Root) spec.Root {
	t.Helper()
	var digest string
	t.Cleanup(func() { // registered first, so it runs after the boxes close
		if digest == "" {
			return
		}
		if _, err := RemoveTemplateRoots(StateDir, func(d string) bool { return d != digest }); err != nil {
			t.Errorf("removing the test template's gvisor root: %v", err)
		}
	})
	root := mk()
	digest = root.Digest
	return root
}

// run runs script under sh in the box and returns its trimmed stdout.
func run(t *testing.T, sess *agent.Session, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := sess.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", script}}, agent.IO{})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	if r.ExitCode != 0 {
		t.Errorf("%s: exit %d, stderr %q", script, r.ExitCode, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

// TestTemplateRoot runs a box on a template: its root is the image's
// tree, read-only, with Warden's user, host names and resolver in /etc,
// the writable scratch, and nothing written into the template's tree,
// which every box on it shares.
func TestTemplateRoot(t *testing.T) {
	requireRunsc(t)
	root := templateRoot(t, "minimal")
	before := treeEntries(t, root.Dir)
	sess := startBox(t, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root})
	cases := []struct{ name, script, want string }{
		{"the image's files, not the host's", "test -e /usr/bin/runsc && echo host || echo image", "image"},
		{"the image's python", "python3 -c 'import sys; print(sys.prefix)'", "/usr"},
		{"Warden's user", "id -un; id -u; echo $HOME", "sandbox\n1000\n/home/sandbox"},
		{"Warden's /etc files", "cat /etc/hostname /etc/resolv.conf; grep -c . /etc/passwd", "sandbox\n# The sandbox resolves no names itself.\n3"},
		{"read-only root", "for p in /x /usr/x /etc/x /etc/passwd; do touch $p 2>/dev/null && echo wrote $p; done; echo done", "done"},
		{"writable scratch", "echo a > /workspace/f && echo b > /tmp/f && echo c > ~/f && cat /workspace/f /tmp/f ~/f | tr -d '\\n'", "abc"},
		{"/var/tmp is /tmp", "echo v > /var/tmp/v && cat /tmp/v", "v"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := run(t, sess, c.script); got != c.want {
				t.Errorf("%s:\ngot  %q\nwant %q", c.script, got, c.want)
			}
		})
	}
	if after := treeEntries(t, root.Dir); after != before {
		t.Errorf("the template's tree had %d entries before the box and %d after: the box wrote into it", before, after)
	}
}

// TestTemplateCharts: a session on the datasci template imports pandas
// and returns a matplotlib chart through the persistent interpreter.
func TestTemplateCharts(t *testing.T) {
	requireRunsc(t)
	root := templateRoot(t, "datasci")
	l := spec.DefaultLimits
	l.Timeout = 3 * time.Minute
	templatetest.CheckChart(t, startBox(t, spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root}), root)
}

// TestTemplateSeeded: a box on a committed template starts with the
// template's home and /workspace, copied into its host-side scratch before
// it starts: readable (its private files too), writable.
func TestTemplateSeeded(t *testing.T) {
	requireRunsc(t)
	root := cleanedRoot(t, func() spec.Root { return templatetest.Seeded(t, "minimal") })
	sess := startBox(t, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root})
	templatetest.CheckSeeded(t, sess)
}
