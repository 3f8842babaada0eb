package egress

import (
	"fmt"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

func TestAuditBounded(t *testing.T) {
	var l audit
	for i := range maxEvents + 5 {
		l.add(spec.NetworkEvent{Host: fmt.Sprint(i)})
	}
	l.finish(0, 3, 4, "closed at the byte limit")
	got := l.snapshot()
	if len(got) != maxEvents+1 {
		t.Fatalf("len(snapshot) = %d, want %d", len(got), maxEvents+1)
	}
	if got[0].BytesUp != 3 || got[0].BytesDown != 4 || got[0].Reason != "; closed at the byte limit" {
		t.Errorf("first event = %+v, want bytes 3/4 and the note", got[0])
	}
	if last, want := got[maxEvents].Reason, "5 more events not recorded: the log keeps the first 10000"; last != want {
		t.Errorf("last reason = %q, want %q", last, want)
	}
	if got[maxEvents-1].Host != fmt.Sprint(maxEvents-1) {
		t.Errorf("kept events are not the first ones: %+v", got[maxEvents-1])
	}
}
