package template

import (
	"slices"
	"testing"
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
