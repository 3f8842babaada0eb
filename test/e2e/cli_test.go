package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// TestCLIRejectsBadInput checks that every way of calling `warden run`
// wrongly ends with warden's own exit code (125, or 127 when the command
// does not exist in the sandbox), nothing on stdout, and exactly one line on
// stderr that names the flag or the problem, so a user or an agent can fix
// the call without reading a usage dump.
func TestCLIRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// sandbox is set when the check needs a sandbox built (root).
		sandbox  bool
		wantCode int
		// wantLine are substrings the one stderr line must contain.
		wantLine []string
	}{
		{"unknown flag", []string{"run", "--bogus-flag", "--", "true"}, false, 125, []string{"--bogus-flag"}},
		{"unparsable size", []string{"run", "--memory", "abc", "--", "true"}, false, 125, []string{"--memory", `"abc"`}},
		{"unparsable size in json mode", []string{"run", "--json", "--disk", "lots", "--", "true"}, false, 125, []string{"--disk", `"lots"`}},
		{"duration without unit", []string{"run", "--timeout", "10", "--", "true"}, false, 125, []string{"--timeout", `"10"`, "unit"}},
		{"unparsable cpus", []string{"run", "--cpus", "x", "--", "true"}, false, 125, []string{"--cpus", `"x"`}},
		{"missing command", []string{"run"}, false, 125, []string{"no command"}},
		{"missing command after --", []string{"run", "--timeout", "5s", "--"}, false, 125, []string{"no command"}},
		{"nonexistent workspace", []string{"run", "--workspace", "/nonexistent-warden-e2e", "--", "true"}, false, 125, []string{"/nonexistent-warden-e2e", "does not exist"}},
		{"deny without proxy", []string{"run", "--deny", "example.com", "--", "true"}, false, 125, []string{"--deny need --net proxy"}},
		{"unknown net mode", []string{"run", "--net", "host", "--", "true"}, false, 125, []string{`"host"`}},
		{"unknown backend", []string{"run", "--backend", "bogus", "--", "true"}, false, 125, []string{`"bogus"`, "unknown"}},
		{"memory below minimum", []string{"run", "--memory", "1KiB", "--", "true"}, false, 125, []string{"memory", "too small"}},
		{"command not found in sandbox", []string{"run", "--", "no-such-command-e2e"}, true, 127, []string{`"no-such-command-e2e"`, "not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.sandbox {
				requireSandbox(t)
			}
			inv := warden(t, "", tt.args...)
			if inv.code != tt.wantCode {
				t.Errorf("warden %q: exit code %d, want %d (stderr %q)", tt.args, inv.code, tt.wantCode, inv.stderr)
			}
			if inv.stdout != "" {
				t.Errorf("warden %q: stdout %q, want nothing", tt.args, inv.stdout)
			}
			checkOneLine(t, inv.stderr, tt.wantLine...)
		})
	}
}

// checkOneLine asserts that stderr is exactly one "warden: ..." line that
// contains every one of want.
func checkOneLine(t *testing.T, stderr string, want ...string) {
	t.Helper()
	if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr has %d lines, want exactly one: %q", n, stderr)
	}
	if !strings.HasPrefix(stderr, "warden: ") {
		t.Errorf("stderr %q does not start with %q", stderr, "warden: ")
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not mention %q", stderr, w)
		}
	}
}

// TestCLIVersion checks that `warden version` prints one line naming warden.
func TestCLIVersion(t *testing.T) {
	inv := warden(t, "", "version")
	if inv.code != 0 {
		t.Fatalf("warden version: exit code %d, want 0 (stderr %q)", inv.code, inv.stderr)
	}
	if !regexp.MustCompile(`^warden \S+.*\n$`).MatchString(inv.stdout) {
		t.Errorf("warden version printed %q, want one line \"warden VERSION\"", inv.stdout)
	}
}

// TestCLIDoctor checks that `warden doctor` finds this host able to run
// sandboxes and proves it with a real run.
func TestCLIDoctor(t *testing.T) {
	requireSandbox(t)
	inv := warden(t, "", "doctor")
	if inv.code != 0 {
		t.Errorf("warden doctor: exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", inv.code, inv.stdout, inv.stderr)
	}
	if !regexp.MustCompile(`(?m)^ok\s+sandbox run\b`).MatchString(inv.stdout) {
		t.Errorf("warden doctor printed no \"ok ... sandbox run\" line:\n%s", inv.stdout)
	}
}
