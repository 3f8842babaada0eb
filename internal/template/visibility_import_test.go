//go:build !slim

package template

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestVisibilityStored: an import is everyone's, a commit its tenants'
// only, across GC; a template a tenant may not use leases and lists as a
// missing one, with the same error.
func TestVisibilityStored(t *testing.T) {
	s := openStore(t, Options{})
	base := importBase(t, s, "base")
	if !slices.Equal(base.SharedWith, []string{Everyone}) {
		t.Errorf("import: SharedWith = %q, want [all]", base.SharedWith)
	}
	const a, b = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	change := layerTar(t, file("added", "a's secret"))
	if _, err := s.Commit("base", base.Digest, bytes.NewReader(change), "mine", []string{a}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit("base", base.Digest, bytes.NewReader(change), "unshared", nil); err == nil {
		t.Errorf("commit sharing with nobody: stored, want a refusal")
	}
	if _, err := s.GC(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get("mine"); err != nil || !slices.Equal(got.SharedWith, []string{a}) {
		t.Errorf("after GC: SharedWith = %q, %v; want [%s]", got.SharedWith, err, a)
	}
	names := func(tenant string) []string {
		infos, err := s.ListFor(tenant)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, i := range infos {
			out = append(out, i.Name)
		}
		return out
	}
	if got := names(a); !slices.Equal(got, []string{"base", "mine"}) {
		t.Errorf("ListFor(a) = %q, want [base mine]", got)
	}
	if got := names(b); !slices.Equal(got, []string{"base"}) {
		t.Errorf("ListFor(b) = %q, want [base]", got)
	}
	_, release, err := s.LeaseFor("mine", a)
	if err != nil {
		t.Fatalf("LeaseFor(mine, a): %v", err)
	}
	release()
	_, _, hidden := s.LeaseFor("mine", b)
	_, _, missing := s.LeaseFor("nope", b)
	if hidden == nil || missing == nil {
		t.Fatalf("LeaseFor by b: hidden %v, missing %v; want both refused", hidden, missing)
	}
	if want := bytes.ReplaceAll([]byte(missing.Error()), []byte(`"nope"`), []byte(`"mine"`)); hidden.Error() != string(want) {
		t.Errorf("LeaseFor(mine, b) = %q, want the missing template's %q", hidden, want)
	}
	// While Remove holds it, a hidden template still answers b as a
	// missing one, never "being removed".
	held, err := s.holdForRemoval("mine")
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	if _, _, err := s.LeaseFor("mine", b); err == nil || err.Error() != hidden.Error() {
		t.Errorf("LeaseFor(mine, b) while being removed: %v, want %q", err, hidden)
	}
	if _, _, err := s.LeaseFor("mine", a); err == nil || !strings.Contains(err.Error(), "being removed") {
		t.Errorf("LeaseFor(mine, a) while being removed: %v, want it being removed", err)
	}
}
