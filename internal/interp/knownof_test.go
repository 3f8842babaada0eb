package interp

import (
	"slices"
	"testing"
)

// TestKnownOf: front ends list only languages New accepts, in order, and
// never null.
func TestKnownOf(t *testing.T) {
	for _, tc := range []struct {
		have, want []string
	}{
		{nil, []string{}},
		{[]string{"cobol"}, []string{}},
		{[]string{"bash", "cobol", "python"}, []string{"bash", "python"}},
		{Languages(), Languages()},
	} {
		got := KnownOf(tc.have)
		if got == nil || !slices.Equal(got, tc.want) {
			t.Errorf("KnownOf(%q) = %#v, want %q", tc.have, got, tc.want)
		}
	}
}
