package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// minimalTemplate returns a --state-dir, removed when t ends, whose
// store (the process's shared one) holds package templatetest's image
// minimal as the template "minimal".
func minimalTemplate(t *testing.T) string {
	t.Helper()
	return sharedTemplates(t, "minimal")
}

// TestRunTemplate runs warden run --template on one imported template
// (importing costs seconds): each part is a subtest.
func TestRunTemplate(t *testing.T) {
	state := minimalTemplate(t)
	t.Run("root", func(t *testing.T) { testRunTemplateRoot(t, state) })
	t.Run("limits", func(t *testing.T) { testRunTemplateLimits(t, state) })
	t.Run("refused", func(t *testing.T) { testRunTemplateRefused(t, state) })
}

// testRunTemplateRoot: warden run --template runs the image's own
// programs (the very inode the store holds), on a root the sandbox
// cannot write, with Warden's /etc/passwd, user, home and the image's
// PATH.
func testRunTemplateRoot(t *testing.T, state string) {
	var st unix.Stat_t
	py := filepath.Join(state, "templates/templates/minimal/rootfs/usr/bin/python3.11")
	if err := unix.Stat(py, &st); err != nil {
		t.Fatalf("the template's python: %v", err)
	}
	flags := []string{"--state-dir", state, "--template", "minimal"}
	tests := []struct {
		script string
		want   string
	}{
		{"python3 -c 'import os; print(os.stat(\"/usr/bin/python3.11\").st_ino)'", strconv.FormatUint(st.Ino, 10) + "\n"},
		{"touch /usr/x /etc/x /x /var/x 2>&1 | grep -c 'Read-only file system'", "4\n"},
		{"head -2 /etc/passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"},
		{"cat /etc/hostname; grep -c sandbox /etc/hosts", "sandbox\n1\n"},
		{"id -u; echo $HOME $USER; cd && touch f && echo home-ok; echo x > /tmp/t && echo tmp-ok; cat /var/tmp/t", "1000\n/home/sandbox sandbox\nhome-ok\ntmp-ok\nx\n"},
		{"grep -c ' /mnt ' /proc/self/mountinfo; ls -A /mnt | wc -l", "0\n0\n"},
		{"echo $PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"},
	}
	for _, tt := range tests {
		r := sh(t, tt.script, flags...)
		if r.Stdout != tt.want || r.ExitCode != 0 {
			t.Errorf("%s: got stdout %q (exit %d, stderr %q, error %q), want %q", tt.script, r.Stdout, r.ExitCode, r.Stderr, r.Error, tt.want)
		}
	}
}

// testRunTemplateLimits: the network policy and limits hold on a
// template as on the host's root.
func testRunTemplateLimits(t *testing.T, state string) {
	flags := []string{"--state-dir", state, "--template", "minimal"}
	r := sh(t, `python3 -c 'import socket; socket.create_connection(("10.0.0.1", 80), timeout=2)' 2>&1 | tail -1`, flags...)
	if !strings.Contains(r.Stdout, "unreachable") {
		t.Errorf("a connection out with --net none: got %q, want the network unreachable", r.Stdout)
	}
	r = sh(t, `for i in $(seq 40); do sleep 5 & done; echo started`, append(flags, "--pids", "16")...)
	if !strings.Contains(r.Stderr, "Cannot fork") || r.Stdout != "" {
		t.Errorf("40 processes under --pids 16: got stdout %q stderr %q, want the shell unable to fork", r.Stdout, r.Stderr)
	}
	r = sh(t, `python3 -c 'b = bytearray(256 << 20); print(len(b))'`, append(flags, "--memory", "64MiB")...)
	if !r.OOMKilled {
		t.Errorf("256 MiB under --memory 64MiB: got %+v, want it OOM-killed", r)
	}
}

// testRunTemplateRefused: an unknown template, or a state directory with
// no store, is one line that says what to do; the run never starts.
func testRunTemplateRefused(t *testing.T, state string) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--state-dir", state, "--template", "nope"}, `no template "nope": see warden template ls`},
		{[]string{"--state-dir", t.TempDir(), "--template", "minimal"}, "no template store at"},
		{[]string{"--state-dir", "none", "--template", "minimal"}, "pass --state-dir"},
	}
	for _, tt := range tests {
		inv := warden(t, "", append(append([]string{"run"}, tt.args...), "--", "true")...)
		msg := strings.TrimSpace(inv.stderr)
		if inv.code != 125 || !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") > 0 {
			t.Errorf("warden run %q: exit %d, stderr %q; want 125 and one line containing %q", tt.args, inv.code, inv.stderr, tt.want)
		}
	}
}

// TestRootlessRunTemplate: an ordinary user runs on a template of a store
// of its own (the init binds the tree by path, checked to be the inode
// the host opened), read-only, with Warden's passwd.
func TestRootlessRunTemplate(t *testing.T) {
	prefix := asNobody(t)
	cached, _ := templatetest.Image(t, "minimal")
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	// The cache is root's: nobody imports a copy of its own.
	layout := filepath.Join(dir, "layout")
	if out, err := exec.Command("cp", "-r", cached, layout).CombinedOutput(); err != nil {
		t.Fatalf("copying the layout: %v: %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", "65534:65534", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	state := filepath.Join(dir, "state")
	if inv := wardenAs(t, prefix, "", "template", "import", "--state-dir", state, "--name", "minimal", layout); inv.code != 0 {
		t.Fatalf("importing as nobody: exit %d, %s", inv.code, inv.stderr)
	}
	r := runRootless(t, prefix, append(rootlessFlags, "--state-dir", state, "--template", "minimal", "--",
		"sh", "-c", "python3 -c 'print(1)'; head -1 /etc/passwd; touch /usr/x 2>&1")...)
	want := "1\nroot:x:0:0:root:/root:/usr/sbin/nologin\ntouch: cannot touch '/usr/x': Read-only file system\n"
	if r.Stdout != want {
		t.Errorf("rootless on a template: stdout %q stderr %q, want %q", r.Stdout, r.Stderr, want)
	}
}
