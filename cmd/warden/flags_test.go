package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestRunListFlags: --env, --allow and --deny (listFlag) take each use's
// value whole, commas included, in order, as pflag's StringArray did, and
// pflag's GetStringArray reads the same values back from String().
func TestRunListFlags(t *testing.T) {
	tests := []struct {
		name             string
		args             []string
		env, allow, deny []string
	}{
		{"none", nil, nil, nil, nil},
		{"repeated", []string{"--env", "A=1", "--env", "B=2,3"}, []string{"A=1", "B=2,3"}, nil, nil},
		{"commas kept", []string{"--allow", "a.example,b.example", "--deny", "c.example"}, nil, []string{"a.example,b.example"}, []string{"c.example"}},
		{"empty value", []string{"--env="}, []string{""}, nil, nil},
		{"comma and quote", []string{"--allow", `a.example,"evil".example`, "--allow", "c"}, nil, []string{`a.example,"evil".example`, "c"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRunCmd().Flags()
			if err := f.Parse(tt.args); err != nil {
				t.Fatalf("parsing %q: %v", tt.args, err)
			}
			for name, want := range map[string][]string{"env": tt.env, "allow": tt.allow, "deny": tt.deny} {
				got := f.Lookup(name).Value.(pflag.SliceValue).GetSlice()
				if !slices.Equal(got, want) {
					t.Errorf("%q gave --%s %q, want %q", tt.args, name, got, want)
				}
				// GetStringArray parses String() back as CSV. With no
				// values String() is "" (help shows no default), which
				// pflag's parser does not take.
				if len(want) == 0 {
					continue
				}
				got, err := f.GetStringArray(name)
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("%q: GetStringArray(%q) = %q, %v, want %q", tt.args, name, got, err, want)
				}
			}
		})
	}
}
