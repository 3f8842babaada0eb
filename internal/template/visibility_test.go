package template

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestUsableBy is the one rule of who may use a template.
func TestUsableBy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ref    string
		shared []string
		tenant string
		want   bool
	}{
		{"everyone's, any tenant", "", []string{Everyone}, "aaaaaaaaaaaaaaaa", true},
		{"everyone's, keyless", "", []string{Everyone}, "", true},
		{"import recorded before visibility", "", nil, "aaaaaaaaaaaaaaaa", true},
		{"pull recorded before visibility", "docker.io/library/python:3.12", nil, "aaaaaaaaaaaaaaaa", true},
		{"tagged pull recorded before visibility", "python:3.12", nil, "", true},
		{"commit recorded before visibility", "base", nil, "aaaaaaaaaaaaaaaa", false},
		{"commit recorded before visibility, keyless", "base", nil, "", false},
		{"its tenant", "base", []string{"aaaaaaaaaaaaaaaa"}, "aaaaaaaaaaaaaaaa", true},
		{"another tenant", "base", []string{"aaaaaaaaaaaaaaaa"}, "bbbbbbbbbbbbbbbb", false},
		{"one of several", "base", []string{"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"}, "bbbbbbbbbbbbbbbb", true},
		{"keyless server's, a keyed tenant", "base", []string{""}, "aaaaaaaaaaaaaaaa", false},
		{"a tenant's, the keyless server", "base", []string{"aaaaaaaaaaaaaaaa"}, "", false},
		{"a tenant named all is not everyone", "base", []string{"aaaaaaaaaaaaaaaa"}, Everyone, false},
	} {
		if got := (Template{Ref: tc.ref, SharedWith: tc.shared}).UsableBy(tc.tenant); got != tc.want {
			t.Errorf("%s: UsableBy(%q) of %q = %v, want %v", tc.name, tc.tenant, tc.shared, got, tc.want)
		}
	}
}

// TestParseShare checks --share-with's values.
func TestParseShare(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"all", []string{Everyone}, false},
		{" all ", []string{Everyone}, false},
		{"aaaaaaaaaaaaaaaa", []string{"aaaaaaaaaaaaaaaa"}, false},
		{"aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb,aaaaaaaaaaaaaaaa", []string{"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"}, false},
		{"mcp", []string{"mcp"}, false},
		{Keyless, []string{""}, false},
		{"keyless, aaaaaaaaaaaaaaaa", []string{"", "aaaaaaaaaaaaaaaa"}, false},
		{"", nil, true},
		{",", nil, true},
		{"keyless,", nil, true},
		{"all,aaaaaaaaaaaaaaaa", nil, true},
		{"aaaaaaaaaaaaaaaa,", nil, true},
		{"Tenant", nil, true},
		{"../x", nil, true},
	} {
		got, err := ParseShare(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseShare(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestShareText: what ls says of each kind of record.
func TestShareText(t *testing.T) {
	for _, tc := range []struct {
		ref    string
		shared []string
		want   string
	}{
		{"", []string{Everyone}, "all"},
		{"", nil, "all"},
		{"docker.io/library/alpine:3.20", nil, "all"},
		{"base", nil, "unset (committed before sharing was recorded)"},
		{"base", []string{"", "aaaaaaaaaaaaaaaa"}, "keyless,aaaaaaaaaaaaaaaa"},
	} {
		if got := (Template{Ref: tc.ref, SharedWith: tc.shared}).ShareText(); got != tc.want {
			t.Errorf("ShareText of ref %q, shared %q = %q, want %q", tc.ref, tc.shared, got, tc.want)
		}
	}
}

// TestValidShare: what every metadata write refuses.
func TestValidShare(t *testing.T) {
	for _, tc := range []struct {
		shared []string
		ok     bool
	}{
		{[]string{Everyone}, true},
		{[]string{"", "aaaaaaaaaaaaaaaa"}, true},
		{nil, false},
		{[]string{Keyless}, false},
		{[]string{Everyone, "aaaaaaaaaaaaaaaa"}, false},
		{[]string{"A"}, false},
	} {
		if err := validShare("x", tc.shared); (err == nil) != tc.ok {
			t.Errorf("validShare(%q) = %v, want ok %v", tc.shared, err, tc.ok)
		}
	}
}

// TestVisibilityStored: an import is everyone's, a commit its tenants'
// only, across GC; a template a tenant may not use leases and lists as a
// missing one, with the same error.
func TestVisibilityStored(t *testing.T) {
	s := openStore(t, Options{})
	lp := filepath.Join(t.TempDir(), "layout")
	p, _ := layout.Write(lp, empty.Index)
	if err := p.AppendImage(testImage(t, baseLayer(t))); err != nil {
		t.Fatal(err)
	}
	base, err := s.Import(context.Background(), lp, "base")
	if err != nil {
		t.Fatal(err)
	}
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
