package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// TestWithExecutor: the flag goes after "run" only when set and when the
// command line chooses neither an executor nor a backend before "--".
func TestWithExecutor(t *testing.T) {
	defer func(prev string) { runExecutor = prev }(runExecutor)
	tests := []struct {
		executor string
		in, want []string
	}{
		{"", []string{"run", "--", "true"}, []string{"run", "--", "true"}},
		{"go", []string{"run", "--json", "--", "true"}, []string{"run", "--executor", "go", "--json", "--", "true"}},
		{"go", []string{"run", "--executor", "fast", "--", "true"}, []string{"run", "--executor", "fast", "--", "true"}},
		{"go", []string{"run", "--backend", "gvisor", "--", "true"}, []string{"run", "--backend", "gvisor", "--", "true"}},
		{"go", []string{"run", "--", "prog", "--executor"}, []string{"run", "--executor", "go", "--", "prog", "--executor"}},
		{"go", []string{"serve", "--listen", "x"}, []string{"serve", "--listen", "x"}},
	}
	for _, tt := range tests {
		runExecutor = tt.executor
		if got := withExecutor(slices.Clone(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("withExecutor(%q) under %q: got %q, want %q", tt.in, tt.executor, got, tt.want)
		}
	}
}

// TestSuitesComplete: escapeSuite and lifecycleSuite name every top-level
// test of their files, so a test added there runs on the Go init too.
func TestSuitesComplete(t *testing.T) {
	for file, suite := range map[string][]suiteTest{"escape_test.go": escapeSuite, "lifecycle_test.go": lifecycleSuite} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				want = append(want, fn.Name.Name)
			}
		}
		var got []string
		for _, s := range suite {
			got = append(got, s.name)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("the suite of %s: got %q, want its tests %q", file, got, want)
		}
	}
}
