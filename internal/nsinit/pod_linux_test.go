package nsinit

import (
	"os"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

func TestCheckPodConfig(t *testing.T) {
	defer func(uid, gid int) { userUID, userGID = uid, gid }(userUID, userGID)
	ok := Config{Session: true, Boxed: true, Stream: true, KernelSysinfo: true}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for accepted
	}{
		{"a boxed session over the stream", func(*Config) {}, ""},
		{"its own ids named", func(c *Config) { c.UID, c.GID = os.Getuid(), os.Getgid() }, ""},
		{"one-shot", func(c *Config) { c.Session = false }, "a Pod's agent serves boxed sessions only"},
		{"not boxed", func(c *Config) { c.Boxed = false }, "a Pod's agent serves boxed sessions only"},
		{"descriptors", func(c *Config) { c.Stream = false }, "serves the stream transport only"},
		{"sysinfo answered", func(c *Config) { c.KernelSysinfo = false }, "cannot answer sysinfo(2)"},
		{"hidden", func(c *Config) { c.HideAgent = true }, "leave Config.HideAgent unset"},
		{"egress bridge", func(c *Config) { c.EgressPort = 3128 }, "leave Config.EgressPort unset"},
		{"another user", func(c *Config) { c.UID = os.Getuid() + 1 }, "leave Config.UID and GID unset"},
	} {
		cfg := ok
		tc.edit(&cfg)
		err := checkPodConfig(&cfg)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: checkPodConfig = %v, want %q", tc.name, err, tc.want)
		}
	}
	if userUID != os.Getuid() || userGID != os.Getgid() {
		t.Errorf("after an accepted Config the user is %d:%d, want the agent's own %d:%d", userUID, userGID, os.Getuid(), os.Getgid())
	}
}

func TestCheckUnprivilegedRefusesRoot(t *testing.T) {
	testhost.RequireRoot(t)
	err := checkUnprivileged()
	if err == nil || !strings.HasPrefix(err.Error(), "running as root: a Pod's agent runs as a non-root uid") {
		t.Errorf("checkUnprivileged as root = %v, want the refusal of root", err)
	}
}

// TestPodExecFails covers the trampoline's failures, each with a shell's
// exit code; its success replaces the process, which the Pod tests in
// internal/poddial cover.
func TestPodExecFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"too few arguments", []string{"256", "/bin/true"}, 126},
		{"a bad limit", []string{"many", "/bin/true", "true"}, 126},
		{"a missing program", []string{"0", "/no/such/program", "program"}, 127},
		{"a directory", []string{"0", "/", "root"}, 126},
	} {
		if got := podExec(tc.args); got != tc.want {
			t.Errorf("%s: podExec(%q) = %d, want %d", tc.name, tc.args, got, tc.want)
		}
	}
}
