package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemplateStore checks the report on a missing, an empty and a
// damaged store.
func TestTemplateStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "templates")
	if c := TemplateStore(dir); c.Status != OK || !strings.Contains(c.Detail, "only the host's root") {
		t.Errorf("missing store: got %+v, want ok and host only", c)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("doctor created the store, want it left alone")
	}
	if err := os.MkdirAll(filepath.Join(dir, "templates", "broken"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "broken", "template.json"), []byte(`{"name":"broken","layers":["sha256:00"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := TemplateStore(dir)
	if c.Status != Warn || !strings.Contains(c.Detail, `template "broken"`) {
		t.Errorf("damaged store: got %+v, want a warning naming the template", c)
	}
}
