package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top directory, two levels above this package.
const root = "../.."

// skipDir reports whether a directory holds no Markdown of the project's
// own: hidden ones (.git, a virtualenv) and installed packages.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor"
}

// walk calls fn with the path of every file under root whose name ends in
// one of exts.
func walk(t *testing.T, exts []string, fn func(path string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		for _, ext := range exts {
			if strings.HasSuffix(p, ext) {
				fn(p)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
}

func TestMarkdownLinksResolve(t *testing.T) {
	n := 0
	walk(t, []string{".md"}, func(p string) {
		n++
		bad, err := CheckFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range bad {
			t.Error(e)
		}
	})
	if n < 10 {
		t.Fatalf("found %d Markdown files under %s, want the repository's (at least 10)", n, root)
	}
}

// docRef matches a citation of a topic file in code or configuration.
var docRef = regexp.MustCompile(`docs/[A-Za-z0-9_-]+\.md`)

func TestCodeCitesExistingDocs(t *testing.T) {
	walk(t, []string{".go", ".yaml", "Makefile"}, func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("reading %q: %v", p, err)
		}
		for _, ref := range docRef.FindAllString(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, ref)); err != nil {
				t.Errorf("%s cites %s, which does not exist: cite the topic file under docs/ that holds it", p, ref)
			}
		}
	})
}

func TestAnchors(t *testing.T) {
	text := "# Warden\n## HTTP API (`internal/server`, `api/openapi.yaml`)\n" +
		"## Host ↔ init protocol\n```\n# not a heading\n```\n## Tenants' shares\n## Tenants' shares\n"
	got := Anchors(text)
	for _, want := range []string{"warden", "http-api-internalserver-apiopenapiyaml",
		"host--init-protocol", "tenants-shares", "tenants-shares-1"} {
		if !got[want] {
			t.Errorf("Anchors() lacks %q; got %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("Anchors() took a line in a code block as a heading: %v", got)
	}
}

func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("b.md", "# Bee\n## Two words\n")
	tests := []struct {
		name, text string
		bad        int
	}{
		{"good file and anchor", "[b](b.md#two-words) [self](#top)\n# Top\n", 0},
		{"missing file", "[x](c.md)\n", 1},
		{"missing anchor", "[x](b.md#three)\n", 1},
		{"missing own anchor", "[x](#nowhere)\n", 1},
		{"web and code skipped", "[w](https://example.org/x) `[c](nowhere.md)`\n```\n[f](nowhere.md)\n```\n", 0},
	}
	for _, tc := range tests {
		bad, err := CheckFile(write("a.md", tc.text))
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) != tc.bad {
			t.Errorf("%s: got %d errors %v, want %d", tc.name, len(bad), bad, tc.bad)
		}
	}
}
