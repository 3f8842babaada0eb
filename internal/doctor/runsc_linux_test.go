package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunscCheck checks that doctor names the runsc in use and its
// version, and warns, with make runsc as the fix, of Debian's and of one
// of no known date.
func TestRunscCheck(t *testing.T) {
	tests := []struct {
		name, out string
		want      Status
		detail    string
	}{
		{"pinned", "runsc version v0.0.0-20260905035102-160fafc42237\nspec: 1.2.1", OK, "version v0.0.0-20260905035102-160fafc42237"},
		{"debian", "runsc version 0.0~20221219.0\nspec: 1.0.2-dev", Warn, "older than the pinned 20260905"},
		{"unstamped", "runsc version VERSION_MISSING", Warn, "of no known date"},
		{"not runsc", "runc version 1.1.5", Warn, "unexpected output"},
		{"flood", "runsc version 1'; head -c 1000000 /dev/zero | tr '\\0' x; printf '", Warn, "unexpected output"},
		{"hangs", "runsc version 1\n'; sleep 5 & printf '", Warn, "--version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "runsc")
			script := "#!/bin/sh\nprintf '%s' '" + tt.out + "'\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			got := runscCheck(context.Background(), bin)
			if got.Status != tt.want || !strings.Contains(got.Detail, tt.detail) || !strings.HasPrefix(got.Detail, bin) {
				t.Errorf("runscCheck(%s) = %s %q, want %s saying %q", tt.name, got.Status, got.Detail, tt.want, tt.detail)
			}
			if (got.Status == Warn) != strings.Contains(got.Fix, "make runsc") {
				t.Errorf("runscCheck(%s) fix = %q, want make runsc exactly on a warning", tt.name, got.Fix)
			}
		})
	}
	if got := runscCheck(context.Background(), filepath.Join(t.TempDir(), "none")); got.Status != Warn || !strings.Contains(got.Fix, "make runsc") {
		t.Errorf("runscCheck(missing) = %+v, want a warning with make runsc", got)
	}
}
