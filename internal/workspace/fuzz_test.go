package workspace

import (
	"strings"
	"testing"
)

// FuzzParsePath checks that every path parsePath accepts names a place
// inside /workspace: no element is empty, "." or "..", none holds a slash
// or NUL, and its String form parses back to the same path.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{".", "a/b", "./a", "/workspace", "/workspace/a/../b", "../x", "a//b", "/etc/passwd", "a/./b", "a\x00b", "/workspace/", "…/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		w, err := parsePath(p)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("parsePath(%q) error has several lines: %q", p, err)
			}
			return
		}
		for _, e := range w.elems {
			if e == "" || e == "." || e == ".." || strings.ContainsAny(e, "/\x00") {
				t.Fatalf("parsePath(%q) kept element %q", p, e)
			}
		}
		back, err := parsePath(w.String())
		if err != nil || back.String() != w.String() {
			t.Errorf("parsePath(%q) = %q, which parses back to %q, %v", p, w.String(), back.String(), err)
		}
	})
}
