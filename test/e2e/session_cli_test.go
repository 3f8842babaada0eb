package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionCLI drives a server with warden session create, exec, cp, ls
// and rm, as a user at a terminal would.
func TestSessionCLI(t *testing.T) {
	srv := startServer(t)
	t.Setenv("WARDEN_URL", srv.url)
	t.Setenv("WARDEN_API_KEY", keyA)
	created := warden(t, "", "session", "create", "--env", "GREETING=hi")
	id := strings.TrimSpace(created.stdout)
	if created.code != 0 || !strings.HasPrefix(id, "ses_") {
		t.Fatalf("session create = %d %q %q, want an id", created.code, created.stdout, created.stderr)
	}
	if inv := warden(t, "", "session", "exec", id, "--language", "python", "--code", "n = 6"); inv.code != 0 {
		t.Fatalf("exec python = %d %q", inv.code, inv.stderr)
	}
	if inv := warden(t, "n * 7", "session", "exec", id, "--language", "python", "--code", "-"); inv.stdout != "42\n" {
		t.Errorf("exec python from stdin = %q %q, want 42", inv.stdout, inv.stderr)
	}
	if inv := warden(t, "", "session", "exec", id, "--", "sh", "-c", "echo $GREETING; exit 3"); inv.code != 3 || inv.stdout != "hi\n" {
		t.Errorf("exec sh = %d %q, want 3 and the session's env", inv.code, inv.stdout)
	}
	if inv := warden(t, "piped\n", "session", "exec", "-i", id, "--", "cat"); inv.stdout != "piped\n" {
		t.Errorf("exec -i cat = %q %q, want stdin passed through", inv.stdout, inv.stderr)
	}
	if inv := warden(t, "", "session", "exec", id, "--language", "python", "--code", "1/0"); inv.code != 1 || !strings.Contains(inv.stderr, "ZeroDivisionError") {
		t.Errorf("exec of code that raises = %d %q, want 1 and the traceback", inv.code, inv.stderr)
	}
	if inv := warden(t, "streamed", "session", "cp", "-", id+":from-stdin.txt"); inv.code != 0 {
		t.Errorf("cp - = %d %q, want the upload from stdin", inv.code, inv.stderr)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("round trip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if inv := warden(t, "", "session", "cp", in, id+":data/in.txt"); inv.code != 0 {
		t.Fatalf("cp in = %d %q", inv.code, inv.stderr)
	}
	out := filepath.Join(dir, "out.txt")
	if inv := warden(t, "", "session", "cp", id+":data/in.txt", out); inv.code != 0 {
		t.Fatalf("cp out = %d %q", inv.code, inv.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "round trip\n" {
		t.Errorf("copied back %q, want the original", b)
	}
	if inv := warden(t, "", "session", "pause", id); inv.code != 0 {
		t.Fatalf("session pause = %d %q", inv.code, inv.stderr)
	}
	if inv := warden(t, "", "session", "ls"); !strings.Contains(inv.stdout, id) || !strings.Contains(inv.stdout, "paused") {
		t.Errorf("session ls = %q, want %s listed, paused", inv.stdout, id)
	}
	if inv := warden(t, "", "session", "resume", id); inv.code != 0 {
		t.Errorf("session resume = %d %q", inv.code, inv.stderr)
	}
	if inv := warden(t, "", "session", "rm", id); inv.code != 0 {
		t.Errorf("session rm = %d %q", inv.code, inv.stderr)
	}
	inv := warden(t, "", "session", "exec", id, "--", "true")
	if inv.code != 125 || strings.Count(inv.stderr, "\n") != 1 || !strings.Contains(inv.stderr, "not_found") {
		t.Errorf("exec in a removed session = %d %q, want 125 and one not_found line", inv.code, inv.stderr)
	}
}
