package native

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestTemplateSessionCharts: a session on the datasci template runs the
// image's python (pandas, which the host lacks), returns a matplotlib
// chart as a PNG through the persistent interpreter, cannot write the
// template's tree, and sees Warden's /etc/passwd over the image's.
func TestTemplateSessionCharts(t *testing.T) {
	testhost.RequireRoot(t)
	root := templatetest.Root(t, "datasci")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startOnTemplate(ctx, t, root, "", "on datasci")
	defer s.Close()
	checks := []struct{ script, want string }{
		{"head -2 /etc/passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"},
		{"touch /usr/lib/x 2>&1; touch /etc/x 2>&1; touch /x 2>&1; true", "Read-only file system"},
		{"echo $HOME:$USER; id -u; echo ok > /tmp/f && cat /tmp/f; echo w > /workspace/f && cat /workspace/f", "/home/sandbox:sandbox\n1000\nok\nw\n"},
	}
	for _, c := range checks {
		r := execSh(t, s, c.script, 20*time.Second)
		if !strings.Contains(r.Stdout, c.want) || strings.Count(c.want, "Read-only") > 0 && strings.Count(r.Stdout, "Read-only") != 3 {
			t.Errorf("%q: got stdout %q stderr %q, want %q", c.script, r.Stdout, r.Stderr, c.want)
		}
	}
	if got := interp.Available(root.Dir); !strings.Contains(strings.Join(got, ","), "python") {
		t.Fatalf("interp.Available(datasci) = %v, want python", got)
	}
	in, err := interp.New("python", s, s.Env(), interp.WithRoot(root.Dir))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	code := "import pandas as pd, matplotlib.pyplot as plt\n" +
		"df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})\n" +
		"df.plot(x='x', y='y')\nplt.show()\npd.__version__"
	out, err := in.Run(ctx, code, nil, nil)
	if err != nil || out.Exception != nil {
		t.Fatalf("running pandas and matplotlib: %v, exception %+v", err, out.Exception)
	}
	if out.Value == "" || len(out.Outputs) != 1 || out.Outputs[0].MimeType != "image/png" {
		t.Fatalf("got value %q and outputs %d (%+v), want pandas' version and one PNG", out.Value, len(out.Outputs), mimes(out.Outputs))
	}
	png, err := base64.StdEncoding.DecodeString(out.Outputs[0].Data)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("the chart is not a PNG (%v)", err)
	}
}

// startOnTemplate starts a session on the template root, with ws as its
// host workspace when set, and a minute per exec (an image's python
// takes a while to start); how says which start failed. The caller
// closes it, before releasing any lease on root.
func startOnTemplate(ctx context.Context, t *testing.T, root spec.Root, ws, how string) *agent.Session {
	t.Helper()
	l := spec.DefaultLimits
	l.Timeout = 60 * time.Second
	s, err := Runtime{}.StartSession(ctx, spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root, Workspace: ws})
	if err != nil {
		t.Fatalf("StartSession %s: %v", how, err)
	}
	return s
}

func mimes(outs []spec.Output) []string {
	var m []string
	for _, o := range outs {
		m = append(m, o.MimeType)
	}
	return m
}

// TestTemplateSeeded: a session on a committed template starts with the
// template's home and /workspace, copied by the init into its own
// scratch (no host scratch: warden run, warden mcp, serve without a state
// directory), writable, its private files readable; with a host
// --workspace only the home is copied, and the host's directory is
// never written.
func TestTemplateSeeded(t *testing.T) {
	testhost.RequireRoot(t)
	root := templatetest.Seeded(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startOnTemplate(ctx, t, root, "", "on a seeded template")
	defer s.Close()
	if r := execSh(t, s, templatetest.SeededScript, 20*time.Second); r.ExitCode != 0 || r.Stdout != templatetest.SeededWant {
		t.Errorf("seeded files: got exit %d, stdout %q, stderr %q; want %q", r.ExitCode, r.Stdout, r.Stderr, templatetest.SeededWant)
	}
	for _, pid := range childInits(t) {
		// A later file may take the number: the seed's is the template's tree.
		fi, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, nsinit.SeedFD))
		if tree, terr := os.Stat(root.Dir); terr != nil || (err == nil && os.SameFile(fi, tree)) {
			t.Errorf("init %d: fd %d is the template's tree (%v), want it closed once copied", pid, nsinit.SeedFD, terr)
		}
	}
	ws := t.TempDir()
	if err := os.Chown(ws, 1000, 1000); err != nil { // a workspace is a regular user's
		t.Fatal(err)
	}
	w := startOnTemplate(ctx, t, root, ws, "with a workspace on a seeded template")
	defer w.Close()
	if r := execSh(t, w, "cat ~/seeded.txt; test -e /workspace/in.csv || echo none", 20*time.Second); r.ExitCode != 0 || r.Stdout != "from the template\nnone\n" {
		t.Errorf("with a host workspace: got exit %d, stdout %q, stderr %q; want the home seeded and no in.csv", r.ExitCode, r.Stdout, r.Stderr)
	}
	if names, err := os.ReadDir(ws); err != nil || len(names) != 0 {
		t.Errorf("the host's workspace: got %v (%v), want it untouched", names, err)
	}
}

// TestTemplateSeededTooLarge: a template whose home does not fit the
// sandbox's disk (2000 files, 1024 inodes at 1 MiB) fails the start in
// one line naming the template and the limit.
func TestTemplateSeededTooLarge(t *testing.T) {
	testhost.RequireRoot(t)
	st, _ := templatetest.ImportNew(t, "minimal")
	root := templatetest.CommitFiles(t, st, "minimal", "files2000", 2000)
	l := spec.DefaultLimits
	l.DiskBytes = spec.MinDiskBytes
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Runtime{}.Run(ctx, spec.Spec{Command: []string{"true"}, Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}, Root: root}, IO{})
	if err == nil || !strings.Contains(err.Error(), `template "files2000"`) || !strings.Contains(err.Error(), "does not fit the sandbox's disk limit") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a run on a template too large for its disk: got %v (%+v), want one line naming the template and the limit", err, r)
	}
}

// childInits is the pids of this process's children that are pid 1 of
// their own pid namespace: the inits of the sandboxes it started.
func childInits(t *testing.T) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // gone meanwhile
		}
		parent := fmt.Sprintf("\nPPid:\t%d\n", os.Getpid())
		if strings.Contains(string(status), parent) && strings.Contains(string(status), fmt.Sprintf("\nNSpid:\t%d\t1\n", pid)) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatal("no sandbox init among this process's children")
	}
	return pids
}
