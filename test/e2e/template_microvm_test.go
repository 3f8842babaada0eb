package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
	"github.com/warden-sandbox/warden/internal/vmbox"
)

// hostileTemplate imports the minimal test image as the template
// "hostile" into a store of the test's own (state-dir/templates) and
// plants in its tree what unpacking never lets in, as a tampered store
// could hold: a set-uid root copy of id and a device node (the memory's
// null, 1:3, harmless whatever opens it). It returns the state directory
// and the store.
func hostileTemplate(t *testing.T) (string, *template.Store) {
	t.Helper()
	requireSandbox(t)
	state := t.TempDir()
	st, err := template.Open(filepath.Join(state, "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := templatetest.Image(t, "minimal")
	ctx, cancel := context.WithTimeout(context.Background(), importTimeout)
	defer cancel()
	if _, err := st.Import(ctx, layout, "hostile"); err != nil {
		t.Fatalf("importing the minimal image: %v", err)
	}
	tpl, err := st.Get("hostile")
	if err != nil {
		t.Fatal(err)
	}
	id, err := os.ReadFile(filepath.Join(tpl.Root, "usr/bin/id"))
	if err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(tpl.Root, "usr/local/bin/suid-id")
	if err := os.WriteFile(suid, id, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(suid, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(tpl.Root, "usr/local/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	return state, st
}

// TestMicrovmTemplateHostile: a template's set-uid files and device
// nodes give the box nothing on microvm: the root the guest mounts is
// read-only, nosuid and nodev (the host's binds are too), so the planted
// set-uid id runs as the box's user and opening the planted node is
// refused. A template committed on it starts with its home and
// /workspace seeded. Then a session on it runs the image's python, and
// warden template rm refuses the template while that session runs (the
// store's lease) and removes it once the session is gone.
func TestMicrovmTemplateHostile(t *testing.T) {
	requireBackend(t, "microvm")
	state, st := hostileTemplate(t)
	flags := []string{"--backend", "microvm", "--state-dir", state, "--template", "hostile"}
	r := sh(t, "id -u; /usr/local/bin/suid-id -u; (: > /usr/local/null) 2>/dev/null && echo opened || echo refused; grep -c ' / / ro,nosuid,nodev' /proc/self/mountinfo", flags...)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.ExitCode != 0 || len(lines) != 4 {
		t.Fatalf("got exit %d, stdout %q (stderr %q, error %q); want 4 lines", r.ExitCode, r.Stdout, r.Stderr, r.Error)
	}
	if uid, err := strconv.Atoi(lines[0]); err != nil || uid == 0 || lines[1] != lines[0] {
		t.Errorf("the box's uid %q, the set-uid root id's euid %q; want the same, not 0 (nosuid)", lines[0], lines[1])
	}
	if lines[2] != "refused" {
		t.Errorf("opening the template's device node: %s, want refused (nodev)", lines[2])
	}
	if lines[3] != "1" {
		t.Errorf("the root's mount options: %s root lines read-only, nosuid and nodev, want 1", lines[3])
	}
	root := templatetest.CommitSeeded(t, st, "hostile", "seeded")
	seeded := []string{"--backend", "microvm", "--state-dir", state, "--template", "seeded"}
	if r := sh(t, templatetest.SeededScript, seeded...); r.ExitCode != 0 || r.Stdout != templatetest.SeededWant {
		t.Errorf("a seeded template: got stdout %q (exit %d, stderr %q, error %q), want %q", r.Stdout, r.ExitCode, r.Stderr, r.Error, templatetest.SeededWant)
	}
	testMicrovmTemplateRm(t, state)
	// The run is over, so no box holds the seeded template's microvm root:
	// rm removes it with the template.
	if inv := warden(t, "", "template", "rm", "seeded", "--state-dir", state); inv.code != 0 || !strings.Contains(inv.stdout, "microvm roots of removed templates") {
		t.Errorf("rm seeded: exit %d, stdout %q, stderr %q; want its microvm root removed", inv.code, inv.stdout, inv.stderr)
	}
	left, err := filepath.Glob(filepath.Join(vmbox.StateDir, "img-"+strings.TrimPrefix(root.Digest, "sha256:")+"-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("the seeded template's microvm roots after rm: %q, %v; want none", left, err)
	}
}

// testMicrovmTemplateRm: a session on the template runs its python, and
// rm refuses the template while the session lives.
func testMicrovmTemplateRm(t *testing.T, state string) {
	srv := startServer(t, "--backend", "microvm", "--state-dir", state)
	id := srv.newSession(t, keyA, map[string]any{"template": "hostile"})
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), map[string]any{"command": []string{"sh", "-c", "test -e /usr/local/bin/suid-id && echo image"}}, http.StatusOK, &r)
	if r.Stdout != "image\n" {
		t.Errorf("a session on the template: got %q (stderr %q), want image", r.Stdout, r.Stderr)
	}
	if r := srv.code(t, keyA, id, "python", "import sys\nsys.prefix", nil); r.Value != "'/usr'" {
		t.Errorf("a python cell, from the image's python: got %q (stderr %q), want '/usr'", r.Value, r.Stderr)
	}
	if inv := warden(t, "", "template", "rm", "hostile", "--state-dir", state); inv.code == 0 || !strings.Contains(inv.stderr, "in use") {
		t.Errorf("rm while a microvm session uses it: exit %d, stderr %q; want refused as in use", inv.code, inv.stderr)
	}
	if code, body := srv.call(t, keyA, http.MethodDelete, "/v1/sessions/"+id, nil, ""); code != http.StatusNoContent {
		t.Fatalf("delete = %d %s", code, body)
	}
	if inv := warden(t, "", "template", "rm", "hostile", "--state-dir", state); inv.code != 0 {
		t.Errorf("rm once the session is gone: exit %d, stderr %q; want removed", inv.code, inv.stderr)
	}
}
