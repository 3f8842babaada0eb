package main

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/template"
)

// TestWidenNote: commit warns, naming the base and who gains its files,
// only when the new template reaches tenants the base does not.
func TestWidenNote(t *testing.T) {
	const a, b = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	everyone := template.Template{Name: "py", SharedWith: []string{template.Everyone}}
	onlyA := template.Template{Name: "amine", Ref: "py", SharedWith: []string{a}}
	for _, tc := range []struct {
		name  string
		base  template.Template
		share []string
		want  string
	}{
		{"everyone's base", everyone, []string{template.Everyone}, ""},
		{"its own tenant", onlyA, []string{a}, ""},
		{"to every tenant", onlyA, []string{template.Everyone},
			"warning: the commit gives every tenant the files of base template amine (shared with " + a + "), which they may not use themselves"},
		{"to another tenant", onlyA, []string{a, b, ""},
			"warning: the commit gives tenant " + b + ",keyless the files of base template amine (shared with " + a + "), which they may not use themselves"},
	} {
		if got := widenNote(tc.base, tc.share); got != tc.want {
			t.Errorf("%s: widenNote = %q, want %q", tc.name, got, tc.want)
		}
	}
}
