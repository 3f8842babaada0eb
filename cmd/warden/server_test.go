package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerBinary: the slim warden hands serve, session and mcp only to
// a warden-server next to it that no one else can replace, and says how
// to fix a missing or unsafe one.
func TestServerBinary(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string
	}{
		{"missing", func(*testing.T, string) {}, "serve: warden-server is not installed next to warden"},
		{"group writable", func(t *testing.T, dir string) { writeExe(t, dir, 0o775) }, "warden-server is writable by group or others"},
		{"not executable", func(t *testing.T, dir string) { writeExe(t, dir, 0o644) }, "warden-server is not executable by its owner"},
		{"directory writable by others", func(t *testing.T, dir string) {
			writeExe(t, dir, 0o755)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, "is writable by group or others: warden-server must be a file (not a symlink)"},
		{"symlink to a file in a directory writable by others", func(t *testing.T, dir string) {
			open := filepath.Join(t.TempDir(), "open")
			if err := os.Mkdir(open, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(open, 0o777); err != nil {
				t.Fatal(err)
			}
			writeExe(t, open, 0o755)
			if err := os.Symlink(filepath.Join(open, serverName), filepath.Join(dir, serverName)); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink"},
		{"directory owned by another user", func(t *testing.T, dir string) {
			writeExe(t, dir, 0o755)
			chownOrSkip(t, dir, 65534)
		}, "neither root nor this user"},
		{"file owned by another user", func(t *testing.T, dir string) {
			writeExe(t, dir, 0o755)
			chownOrSkip(t, filepath.Join(dir, serverName), 65534)
		}, "neither root nor this user"},
		{"trusted", func(t *testing.T, dir string) { writeExe(t, dir, 0o755) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			f, err := serverBinary(filepath.Join(dir, "warden"), "serve")
			if f != nil {
				defer closeOrLog(t, f)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("serverBinary = %v, %v; want an error containing %q", f, err, tt.wantErr)
				}
				return
			}
			if want := filepath.Join(dir, serverName); err != nil || f.Name() != want {
				t.Fatalf("serverBinary = %v, %v; want %q", f, err, want)
			}
		})
	}
}

// chownOrSkip gives p to uid, which only root can.
func chownOrSkip(t *testing.T, p string, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	if err := os.Chown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
}

func closeOrLog(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Logf("closing %s: %v", f.Name(), err)
	}
}

func writeExe(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, serverName)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestSlimLinksNoServer: the slim build (bin/warden, what every `warden
// run` starts) links none of the packages only serving, pulling or
// importing templates need, whose package init and pages each run would
// pay (docs/performance.md, "The CLI's start"). Each entry bans a package
// and everything below it.
func TestSlimLinksNoServer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-tags", "slim", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, banned := range []string{
		"github.com/warden-sandbox/warden/internal/server",
		"github.com/warden-sandbox/warden/internal/mcp",
		"github.com/warden-sandbox/warden/internal/e2b",
		"github.com/modelcontextprotocol/go-sdk/mcp",
		"google.golang.org/protobuf/proto",
		"connectrpc.com/connect",
		"go.yaml.in/yaml/v3",
		// template pull and import (handed to warden-server): the
		// registry client, image formats, compressors and credentials.
		"github.com/google/go-containerregistry/pkg/v1/remote",
		"github.com/google/go-containerregistry/pkg/v1/layout",
		"github.com/google/go-containerregistry/pkg/v1/tarball",
		"github.com/google/go-containerregistry/pkg/authn",
		"github.com/google/go-containerregistry/pkg/name",
		"github.com/opencontainers/go-digest",
		"github.com/opencontainers/image-spec",
		"github.com/klauspost/compress",
		"github.com/docker/cli",
		"github.com/sirupsen/logrus",
	} {
		for _, d := range deps {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("the slim build links %s, want nothing under %s", d, banned)
			}
		}
	}
}

// TestCheckHandoff: a warden-server handed a command by a warden of
// another build refuses with one line saying how to fix it, and the
// handed version never reaches what the server starts.
func TestCheckHandoff(t *testing.T) {
	tests := []struct {
		name    string
		set     bool
		from    string
		wantErr string
	}{
		{"not handed", false, "", ""},
		{"same build", true, buildVersion(), ""},
		{"another build", true, buildVersion() + "-other", "reinstall bin/ whole from one build"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.set {
				t.Setenv(handoffEnv, tt.from)
			}
			err := checkHandoff()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("checkHandoff() = %v, want an error containing %q (none if empty)", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("checkHandoff() = %q, want one line", err)
			}
			if v, ok := os.LookupEnv(handoffEnv); ok {
				t.Errorf("%s = %q after checkHandoff, want it removed", handoffEnv, v)
			}
		})
	}
}
