package nsinit

import (
	"os"
	"slices"
	"strconv"
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
		{"the egress bridge, over the stream", func(c *Config) { c.EgressPort = 3128 }, ""},
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
// exit code and a report on its error descriptor that the agent turns
// into StartFailed; its success replaces the process, which the Pod
// tests in internal/poddial cover.
func TestPodExecFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		want   int
		report string // "" for none
	}{
		{"too few arguments", []string{"256", "FD", "/bin/true"}, 126, ""},
		{"a bad limit", []string{"many", "FD", "/bin/true", "true"}, 126, ""},
		{"a bad descriptor", []string{"0", "three", "/bin/true", "true"}, 126, ""},
		{"a missing program", []string{"0", "FD", "/no/such/program", "program"}, 127, `starting "program": fork/exec /no/such/program: no such file or directory (a missing interpreter?)`},
		{"a directory", []string{"0", "FD", "/", "root"}, 126, `starting "root": fork/exec /: permission denied`},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		args := slices.Clone(tc.args)
		if args[1] == "FD" {
			args[1] = strconv.Itoa(int(w.Fd()))
		}
		if got := podExec(args); got != tc.want {
			t.Errorf("%s: podExec(%q) = %d, want %d", tc.name, tc.args, got, tc.want)
		}
		w.Close()
		var got string
		if st := podStartReport(r, args[len(args)-1], args[len(args)-2]); st != nil {
			got = st.Error
			if !st.StartFailed || st.ExitCode != tc.want {
				t.Errorf("%s: the agent's status %+v, want StartFailed and exit %d", tc.name, *st, tc.want)
			}
		}
		r.Close()
		if got != tc.report {
			t.Errorf("%s: the agent read %q, want %q", tc.name, got, tc.report)
		}
	}
}
