package agent

import "testing"

// TestOOMsSince: a stream exec's OOM kills are the session cgroup's
// during its life, never a false kill from an unread counter nor an
// underflow from one that went back.
func TestOOMsSince(t *testing.T) {
	for _, tc := range []struct {
		name      string
		base, now uint64
		ok        bool
		want      uint64
	}{
		{"none", 2, 2, true, 0},
		{"one during the exec", 2, 3, true, 1},
		{"end unread", 0, 0, false, 0},
		{"end unread after kills", 5, 0, false, 0},
		{"counter went back", 5, 3, true, 0},
	} {
		if got := oomsSince(tc.base, tc.now, tc.ok); got != tc.want {
			t.Errorf("%s: oomsSince(%d, %d, %v) = %d, want %d", tc.name, tc.base, tc.now, tc.ok, got, tc.want)
		}
	}
}
