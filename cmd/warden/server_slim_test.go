//go:build slim

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cliEnv makes this test binary run warden's CLI on its arguments
// instead of the tests, so that a test can run the slim stand-ins, which
// replace their process.
const cliEnv = "WARDEN_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" && filepath.Base(os.Args[0]) == serverName {
		fakeServer()
	}
	if os.Getenv(cliEnv) == "1" {
		os.Exit(execute(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeServer is the warden-server of TestStandIn: it prints what it was
// handed and exits.
func fakeServer() {
	fmt.Printf("args: %s\nversion: %s\n", strings.Join(os.Args[1:], " "), os.Getenv(handoffEnv))
	os.Exit(0)
}

// TestStandIn runs the slim build's stand-ins against a fake trusted
// warden-server beside them: serve, session, mcp, template pull and
// template import, `help serve` and completion of their flags all reach it with their arguments and this
// build's version, which nothing else sets. Both warden and the fake
// warden-server are this test binary (TestMain), as warden-server must
// be a binary: it is executed through a close-on-exec descriptor.
func TestStandIn(t *testing.T) {
	dir := t.TempDir()
	warden := filepath.Join(dir, "warden")
	linkOrCopy(t, warden)
	linkOrCopy(t, filepath.Join(dir, serverName))
	tests := []struct {
		name string
		args []string
	}{
		{"serve", []string{"serve", "--listen", "127.0.0.1:0"}},
		{"session", []string{"session", "ls"}},
		{"mcp", []string{"mcp", "--help"}},
		{"help serve", []string{"help", "serve"}},
		{"completion of serve's flags", []string{"__complete", "serve", "--"}},
		{"template pull", []string{"template", "pull", "127.0.0.1:1/busybox"}},
		{"template import after the store's flags", []string{"template", "--state-dir", "/var/lib/warden", "import", "--name", "x", "layout.tar"}},
		{"template import --help", []string{"template", "import", "--help"}},
		{"help template pull", []string{"help", "template", "pull"}},
		{"completion of template import's flags", []string{"__complete", "template", "import", "--"}},
		{"completion of template import's flags after the store's flags", []string{"__complete", "template", "--state-dir", "/x", "import", "--"}},
		{"help template import after the store's flags", []string{"help", "template", "--state-dir", "/x", "import"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(warden, tt.args...)
			cmd.Env = append(os.Environ(), cliEnv+"=1", handoffEnv+"=stale")
			out, err := cmd.CombinedOutput()
			want := "args: " + strings.Join(tt.args, " ") + "\nversion: " + buildVersion() + "\n"
			if err != nil || string(out) != want {
				t.Errorf("warden %v = %q, %v; want %q", tt.args, out, err, want)
			}
		})
	}
}

// linkOrCopy puts this test binary at dst, the stand-in's warden.
func linkOrCopy(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if os.Link(src, dst) == nil {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer closeOrLog(t, in)
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
