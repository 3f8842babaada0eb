package boxname

import (
	"errors"
	"testing"
)

// TestJudge: a container's owner is dead only when from another boot, or
// from this boot and pid namespace with its pid gone or reused; one from
// another pid namespace is never judged, however its pid looks here.
func TestJudge(t *testing.T) {
	self := Owner{Boot: "b1", PidNS: 7, PID: 100, Start: 50}
	// Pids 200 (started at 60) and 100 run here; 300 is gone; 400 is unreadable.
	start := func(pid int) (uint64, bool, error) {
		switch pid {
		case 100:
			return 50, false, nil
		case 200:
			return 60, false, nil
		case 400:
			return 0, false, errors.New("permission denied")
		}
		return 0, true, nil
	}
	tests := []struct {
		name string
		o    Owner
		want Verdict
	}{
		{"self", self, OwnerLive},
		{"live peer", Owner{"b1", 7, 200, 60}, OwnerLive},
		{"gone pid", Owner{"b1", 7, 300, 60}, OwnerDead},
		{"reused pid", Owner{"b1", 7, 200, 59}, OwnerDead},
		{"own pid reused", Owner{"b1", 7, 100, 49}, OwnerDead},
		{"unreadable pid", Owner{"b1", 7, 400, 1}, OwnerLive},
		{"foreign pidns, pid gone here", Owner{"b1", 8, 300, 60}, OwnerForeign},
		{"foreign pidns, same pid as self", Owner{"b1", 8, 100, 50}, OwnerForeign},
		{"earlier boot", Owner{"b0", 7, 200, 60}, OwnerDead},
		{"pid 0", Owner{"b1", 7, 0, 0}, OwnerForeign},
		{"pid -1", Owner{"b1", 7, -1, 0}, OwnerForeign},
	}
	for _, tt := range tests {
		if got := judge(self, tt.o, start); got != tt.want {
			t.Errorf("%s: judge(%v) = %d, want %d", tt.name, tt.o, got, tt.want)
		}
	}
}

// TestParseOwner: only what Owner.String writes reads back; bare pids (an
// older Warden's labels) and garbled values are not owners.
func TestParseOwner(t *testing.T) {
	o := Owner{Boot: "0d6c-aa", PidNS: 4026531836, PID: 42, Start: 1234}
	if got, ok := ParseOwner(o.String()); !ok || got != o {
		t.Errorf("ParseOwner(%q) = %v, %v; want %v, true", o.String(), got, ok, o)
	}
	for _, s := range []string{"", "42", "b:1:42", "b:1:42:5:6", ":1:42:5", "b:x:42:5", "b:1:0:5", "b:1:-1:5",
		"b:1:+42:5", "b:1:042:5", "b:1:42:-5"} {
		if got, ok := ParseOwner(s); ok {
			t.Errorf("ParseOwner(%q) = %v, true; want false", s, got)
		}
	}
}
