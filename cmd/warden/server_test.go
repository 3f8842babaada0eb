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
		{"group writable", func(t *testing.T, dir string) { writeExe(t, dir, 0o775) }, "must be an executable owned by root or this user"},
		{"not executable", func(t *testing.T, dir string) { writeExe(t, dir, 0o644) }, "must be an executable owned by root or this user"},
		{"directory writable by others", func(t *testing.T, dir string) {
			writeExe(t, dir, 0o755)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, "must be an executable owned by root or this user"},
		{"trusted", func(t *testing.T, dir string) { writeExe(t, dir, 0o755) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			got, err := serverBinary(filepath.Join(dir, "warden"), "serve")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("serverBinary = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if want := filepath.Join(dir, serverName); err != nil || got != want {
				t.Fatalf("serverBinary = %q, %v; want %q", got, err, want)
			}
		})
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
// run` starts) links none of the packages only serving needs, whose
// package init and pages each run would pay (docs/performance.md, "The
// CLI's start").
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
	} {
		for _, d := range deps {
			if d == banned {
				t.Errorf("the slim build links %s", banned)
			}
		}
	}
}
