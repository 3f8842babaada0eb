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
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil { // os.Chmod drops 0o4000: only ModeSetuid sets it
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(tpl.Root, "usr/local/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	return state, st
}

// hostileScript prints, from inside a box on the hostile template: the
// box's uid; the planted set-uid id's owner, group and mode and the euid
// it runs with; whether the planted node is there as the memory's null
// and whether a read-only open of it (which only nodev refuses, whatever
// the ro bit) succeeds; and from the mount flags (statvfs of their
// directories: QEMU opens a path to answer statfs, and the host's nodev
// refuses it the node) whether the mounts holding both files are nosuid
// and nodev, with how many of the
// guest's 9p mounts (the root and the scratch's) lack either. Every
// process of a box runs with no_new_privs, under which the kernel
// ignores set-uid bits whatever the mount: the euid alone cannot prove
// nosuid, so the flags are read.
const hostileScript = `id -u
stat -c %u:%g:%a /usr/local/bin/suid-id
/usr/local/bin/suid-id -u
stat -c %F:%t:%T /usr/local/null
head -c1 </usr/local/null >/dev/null 2>&1 && echo opened || echo refused
python3 -c '
import os
want = os.ST_NOSUID | os.ST_NODEV
files = all(os.statvfs(p).f_flag & want == want for p in ("/usr/local/bin", "/usr/local"))
n = bad = 0
for line in open("/proc/self/mountinfo"):
    mount, sb = line.split(" - ", 1)
    if sb.split()[0] == "9p":
        opts = mount.split()[5].split(",")
        n += 1
        bad += not ("nosuid" in opts and "nodev" in opts)
print(files, n, bad)
'`

// TestMicrovmTemplateHostile: a template's set-uid files and device
// nodes give the box nothing on microvm: the guest sees them as planted
// (root's, set-uid; the memory's null), yet every 9p mount of the guest
// (the root, read-only, and the scratch's) is nosuid and nodev, read
// from the mount flags (hostileScript says why the euid cannot show
// it), and opening the node is refused. A template committed on it
// starts with its home and /workspace seeded. Then a session on it runs
// the image's python, and warden template rm refuses the template while
// that session runs (the store's lease) and removes it once the session
// is gone.
func TestMicrovmTemplateHostile(t *testing.T) {
	requireBackend(t, "microvm")
	state, st := hostileTemplate(t)
	flags := []string{"--backend", "microvm", "--state-dir", state, "--template", "hostile"}
	r := sh(t, hostileScript, flags...)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.ExitCode != 0 || len(lines) != 6 {
		t.Fatalf("got exit %d, stdout %q (stderr %q, error %q); want 6 lines", r.ExitCode, r.Stdout, r.Stderr, r.Error)
	}
	if uid, err := strconv.Atoi(lines[0]); err != nil || uid == 0 || lines[2] != lines[0] {
		t.Errorf("the box's uid %q, the set-uid root id's euid %q; want the same, not 0", lines[0], lines[2])
	}
	if lines[1] != "0:0:4755" {
		t.Errorf("the planted id as the guest sees it: %s, want 0:0:4755 (root's, set-uid)", lines[1])
	}
	if lines[3] != "character special file:1:3" {
		t.Errorf("the planted node as the guest sees it: %s, want the character device 1:3", lines[3])
	}
	if lines[4] != "refused" {
		t.Errorf("a read-only open of the template's device node: %s, want refused (nodev)", lines[4])
	}
	f := strings.Fields(lines[5])
	if n, err := strconv.Atoi(f[min(1, len(f)-1)]); len(f) != 3 || f[0] != "True" || err != nil || n < 2 || f[2] != "0" {
		t.Errorf("mount flags: %q; want the files' mounts nosuid and nodev (True), the root and scratch 9p mounts (2 or more), none lacking either (0)", lines[5])
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
