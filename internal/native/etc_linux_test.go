package native

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRefuseEtcOverlap(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "run", "warden-etc")
	inside := filepath.Join(base, "etc-1", "ssl")
	other := filepath.Join(dir, "work")
	for _, d := range []string{inside, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	alias := filepath.Join(dir, "alias")
	if err := os.Symlink(filepath.Join(dir, "run"), alias); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, workspace string
		refused         bool
	}{
		{"none", "", false},
		{"elsewhere", other, false},
		{"the templates' directory", base, true},
		{"above it", filepath.Dir(base), true},
		{"inside a template", inside, true},
		{"another path above it", alias, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := refuseEtcOverlap(tt.workspace, base)
			if got := err != nil; got != tt.refused {
				t.Errorf("refuseEtcOverlap(%q) = %v; want refused %v", tt.workspace, err, tt.refused)
			}
		})
	}
}
