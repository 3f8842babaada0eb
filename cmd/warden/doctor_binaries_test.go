package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/doctor"
)

// TestBinaryCheckServer: doctor's warden-server line says whether it is
// there, trusted and of this build, with the fix when not.
func TestBinaryCheckServer(t *testing.T) {
	sameAs := func(v string) string {
		return "#!/bin/sh\n[ \"$" + handoffEnv + "\" = '" + v + "' ] || { echo 'reinstall bin/ whole from one build' >&2; exit 125; }\n"
	}
	tests := []struct {
		name       string
		script     string
		dirMode    os.FileMode
		wantStatus doctor.Status
		wantDetail string
	}{
		{"missing", "", 0o755, doctor.Warn, "not installed beside warden"},
		{"directory writable by others", sameAs(buildVersion()), 0o777, doctor.Warn, "is writable by group or others"},
		{"another build", sameAs("other"), 0o755, doctor.Warn, "another build"},
		{"this build", sameAs(buildVersion()), 0o755, doctor.OK, "present, trusted, this build"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.script != "" {
				if err := os.WriteFile(filepath.Join(dir, serverName), []byte(tt.script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, tt.dirMode); err != nil {
				t.Fatal(err)
			}
			c := binaryChecks(context.Background(), filepath.Join(dir, "warden"))[0]
			if c.Status != tt.wantStatus || !strings.Contains(c.Detail, tt.wantDetail) {
				t.Errorf("warden-server check = %s %q, want %s containing %q", c.Status, c.Detail, tt.wantStatus, tt.wantDetail)
			}
			if c.Status != doctor.OK && c.Fix == "" {
				t.Errorf("warden-server check %s has no fix", c.Status)
			}
		})
	}
}
