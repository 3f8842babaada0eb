package spec

import "testing"

// TestOrList: a list of any length, none included, reads as one choice.
func TestOrList(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{}, ""},
		{[]string{"native"}, "native"},
		{[]string{"fd", "stream"}, "fd or stream"},
		{[]string{"native", "gvisor", "docker"}, "native, gvisor or docker"},
		{[]string{"a", "b", "c", "d"}, "a, b, c or d"},
	} {
		if got := OrList(tc.names); got != tc.want {
			t.Errorf("OrList(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
