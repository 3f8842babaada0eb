package nsinit

import "testing"

// TestParseOOMKills reads the oom_kill line of memory.events as the
// guest kernel writes it, and refuses a file without one or with a bad
// number rather than report a count it did not read.
func TestParseOOMKills(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     uint64
		ok       bool
	}{
		{"none yet", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", 0, true},
		{"three kills", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 3\noom_group_kill 0\n", 3, true},
		{"no trailing newline", "oom 1\noom_kill 1", 1, true},
		{"oom_group_kill is not oom_kill", "oom_group_kill 5\n", 0, false},
		{"missing", "low 0\nhigh 0\n", 0, false},
		{"negative", "oom_kill -1\n", 0, false},
		{"not a number", "oom_kill x\n", 0, false},
		{"empty", "", 0, false},
	} {
		got, err := parseOOMKills([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: parseOOMKills(%q) = %d, %v; want %d, ok %v", tc.name, tc.in, got, err, tc.want, tc.ok)
		}
	}
}
