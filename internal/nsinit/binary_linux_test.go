package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	}{
		{"owner-only executable", 0o755, 0o755, true, true},
		{"group-writable file", 0o775, 0o755, true, false},
		{"world-writable file", 0o757, 0o755, true, false},
		{"not executable", 0o644, 0o755, true, false},
		{"world-writable directory", 0o755, 0o777, true, false},
		{"missing", 0, 0o755, false, false},
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
			if got := trustedInit(p); got != tt.wantTrust {
				t.Errorf("trustedInit(%s) = %v, want %v", tt.name, got, tt.wantTrust)
			}
		})
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
