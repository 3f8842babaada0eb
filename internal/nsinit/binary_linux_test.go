package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestTrustedInit checks that an init anyone but its owner could replace
// is never started.
func TestTrustedInit(t *testing.T) {
	tests := []struct {
		name      string
		fileMode  os.FileMode
		dirMode   os.FileMode
		exists    bool
		wantTrust bool
		// change, if set, alters the setup before the check.
		change func(t *testing.T, p string)
	}{
		{"owner-only executable", 0o755, 0o755, true, true, nil},
		{"symlink to a file in a world-writable directory", 0o755, 0o755, false, false, symlinkFromOpenDir},
		{"directory owned by another user", 0o755, 0o755, true, false, func(t *testing.T, p string) { chownOrSkip(t, filepath.Dir(p), 65534) }},
		{"file owned by another user", 0o755, 0o755, true, false, func(t *testing.T, p string) { chownOrSkip(t, p, 65534) }},
		{"group-writable file", 0o775, 0o755, true, false, nil},
		{"world-writable file", 0o757, 0o755, true, false, nil},
		{"not executable", 0o644, 0o755, true, false, nil},
		{"world-writable directory", 0o755, 0o777, true, false, nil},
		{"missing", 0, 0o755, false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bin")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, InitName)
			if tt.exists {
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tt.fileMode); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, tt.dirMode); err != nil {
				t.Fatal(err)
			}
			if tt.change != nil {
				tt.change(t, p)
			}
			if got := trustedInit(p); got != tt.wantTrust {
				t.Errorf("trustedInit(%s) = %v, want %v", tt.name, got, tt.wantTrust)
			}
		})
	}
}

// symlinkFromOpenDir puts at p a symlink to a trusted-looking file in a
// directory anyone can write, where another user could swap it.
func symlinkFromOpenDir(t *testing.T, p string) {
	t.Helper()
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(open, InitName)
	if err := os.WriteFile(target, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
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

// TestProbeInit: an init beside warden is used only if it answers the
// probe with this build's protocol version; one from before versioning
// (which exits 111 unasked) or from another build is found before any
// sandbox starts.
func TestProbeInit(t *testing.T) {
	tests := []struct{ name, script, want string }{
		{"this build", fmt.Sprintf("echo %d", Version), ""},
		{"another build", fmt.Sprintf("echo %d", Version+1), fmt.Sprintf("speaks protocol version \"%d\\n\" but warden speaks version %d", Version+1, Version)},
		{"before versioning", "exit 111", "an init from before protocol versioning"},
		{"garbage", "echo hello", "speaks protocol version \"hello\\n\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), InitName)
			if err := os.WriteFile(p, []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := probeInit(p)
			if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("probeInit() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestBinaryPathTrustsSelfOnlyIfSafe: with no small init to bind, a
// runtime's box gets warden's own path only when no other user could
// replace the file there, as the small init is held to.
func TestBinaryPathTrustsSelfOnlyIfSafe(t *testing.T) {
	findInit()
	probeOnce.Do(func() {})
	savedLean, savedBoxed, savedSelf := lean, boxedLean, self
	t.Cleanup(func() { lean, boxedLean, self = savedLean, savedBoxed, savedSelf })
	lean, boxedLean = "", ""
	tests := []struct {
		dirMode os.FileMode
		wantErr bool
	}{
		{0o755, false},
		{0o777, true},
	}
	for _, tt := range tests {
		dir := filepath.Join(t.TempDir(), "bin")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		self = filepath.Join(dir, "warden")
		if err := os.WriteFile(self, []byte("#!/bin/true\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tt.dirMode); err != nil {
			t.Fatal(err)
		}
		got, err := BinaryPath()
		if (err != nil) != tt.wantErr || (err == nil && got != self) {
			t.Errorf("directory %o: BinaryPath() = %q, %v; want error %v", tt.dirMode, got, err, tt.wantErr)
		}
	}
}

// TestProbeExec: a warden-exec of another build (another plan version,
// or none) is refused in one line naming both versions; this build's is
// taken.
func TestProbeExec(t *testing.T) {
	tests := []struct {
		name, script, want string
	}{
		{"this build", fmt.Sprintf("echo %d", plan.Version), ""},
		{"older build", "echo 1", fmt.Sprintf("reads plan version \"1\\n\" but this warden writes version %d", plan.Version)},
		{"no version", "exit 111", "asking"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), ExecName)
			if err := os.WriteFile(p, []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := probeExec(p)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("probeExec: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("probeExec: %v, want one line containing %q", err, tt.want)
			}
		})
	}
}
