// Package discards keeps every result Warden's own code assigns to `_`
// alone (`_ = f()`, `_, _ = g()`) explained: such a line needs a comment,
// on it or ending on the line before, that is a reason of its own (not
// only "as above"). It checks only that such a comment is there, not
// that it is true, and not results dropped otherwise (a call whose
// result is ignored, `x, _ :=`).
package discards

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// generated is the standard marker of generated Go files
// (https://go.dev/s/generatedcode), whose discards are the generator's.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// bareDiscards lists the lines of f's assignments to nothing but blank
// identifiers (`_ = f()`, `_, _ = g()`) with no reason comment on the same
// line or ending on the line before.
func bareDiscards(fset *token.FileSet, f *ast.File) []int {
	commented := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if !isReason(c.Text) {
				continue
			}
			for l := fset.Position(c.Pos()).Line; l <= fset.Position(c.End()).Line; l++ {
				commented[l] = true
			}
		}
	}
	var lines []int
	ast.Inspect(f, func(n ast.Node) bool {
		a, ok := n.(*ast.AssignStmt)
		if !ok || !allBlank(a.Lhs) {
			return true
		}
		l := fset.Position(a.Pos()).Line
		if !commented[l] && !commented[l-1] {
			lines = append(lines, l)
		}
		return true
	})
	return lines
}

// noReason matches a comment that only points elsewhere ("as above",
// "same", "ditto"), which says nothing once the line above changes.
var noReason = regexp.MustCompile(`(?i)^(as above|see above|same( as above)?|ditto)?$`)

// isReason says whether comment (with its // or /* */) says something of
// its own: words left once the markers and punctuation are trimmed, and
// not only a pointer to another comment.
func isReason(comment string) bool {
	text := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(comment, "//"), "/*"), "*/")
	text = strings.Trim(text, " \t.:;,!-")
	return !noReason.MatchString(text)
}

// allBlank says whether every target of an assignment is _.
func allBlank(lhs []ast.Expr) bool {
	for _, e := range lhs {
		if id, ok := e.(*ast.Ident); !ok || id.Name != "_" {
			return false
		}
	}
	return true
}

func TestBareDiscardsFindsOnlyUnexplained(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []int
	}{
		{"bare", "_ = f()", []int{4}},
		{"two blanks", "_, _ = g()", []int{4}},
		{"comment on the line", "_ = f() // cannot fail: f only reads", nil},
		{"comment before", "// a pipe's close has nothing to report\n_ = f()", nil},
		{"comment two lines before", "// far away\n\n_ = f()", []int{6}},
		{"one result kept", "x, _ := g(); _ = x // x is used", nil},
		{"in a closure", "go func() { _ = f() }()", []int{4}},
		{"only as above", "// f only reads\n_ = f()\n_ = f() // as above", []int{6}},
		{"as above before", "// As above.\n_ = f()", []int{5}},
		{"empty comment", "_ = f() //", []int{4}},
		{"as above with a reason", "// as above: f only reads\n_ = f()", nil},
	}
	for _, tt := range tests {
		src := "package p\n\nfunc h() {\n" + tt.body + "\n}\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
		if err != nil {
			t.Fatalf("%s: parsing: %v", tt.name, err)
		}
		if got := bareDiscards(fset, f); !slices.Equal(got, tt.want) {
			t.Errorf("%s: bareDiscards() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestNoUnexplainedDiscards walks the module's non-test, non-generated Go
// files: a cleanup error is logged or returned, and a discard left says
// why (common rule: cleanup errors logged, never silently dropped).
func TestNoUnexplainedDiscards(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("finding the module root: %v", err)
	}
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if generated.Match(src) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		for _, l := range bareDiscards(fset, f) {
			rel, _ := filepath.Rel(root, p) // p is under root, as WalkDir found it there
			t.Errorf("%s:%d: a result dropped with `_ =` and no reason: log it, return it, or say on this line or the one before why it cannot fail or nobody could act on it", rel, l)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	if files < 100 {
		t.Fatalf("checked %d files; the walk did not find the module's code", files)
	}
}
