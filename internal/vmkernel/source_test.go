package vmkernel

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestInstalledSource: the version from the changelog's first line only,
// strictly, within the bound.
func TestInstalledSource(t *testing.T) {
	tests := []struct {
		name, first string
		want, err   string
	}{
		{"security update", "linux (6.1.200-1) bookworm-security; urgency=high\n", "6.1.200-1", ""},
		{"another package", "firefox (1.0) unstable; urgency=low\n", "", "is not \"linux (VERSION) ...\""},
		{"bad version", "linux (6.1;rm) bookworm\n", "", "is not"},
		{"no line end", strings.Repeat("x", maxChangelogLine+10), "", "no first line within 256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "changelog.Debian.gz")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			z := gzip.NewWriter(f)
			if _, err := z.Write([]byte(tt.first + "\n  * more\n")); err != nil {
				t.Fatal(err)
			}
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := installedSource(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("installedSource: got %q, %v, want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("installedSource: got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

// TestInstalledSourceHere: on a host with linux-source-6.1, its version
// reads (the test of the real file's format).
func TestInstalledSourceHere(t *testing.T) {
	if _, err := os.Stat(sourceChangelog); err != nil {
		testhost.SkipOrFail(t, "no linux-source-6.1 here (make microvm-kernel installs it): "+err.Error())
	}
	got, err := installedSource(sourceChangelog)
	if err != nil || !strings.HasPrefix(got, "6.1.") {
		t.Fatalf("installedSource(%s): got %q, %v, want a 6.1.x version", sourceChangelog, got, err)
	}
}
