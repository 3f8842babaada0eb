package egress

import (
	"fmt"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// maxEvents bounds one attachment's audit log: a sandbox looping on
// denied requests must not grow the Warden process without end. The
// first events are kept, as they explain how a run went wrong.
const maxEvents = 10000

// audit is one attachment's log of decisions.
type audit struct {
	mu       sync.Mutex
	events   []spec.NetworkEvent
	dropped  int
	lastDrop time.Time
}

// add records ev and returns its index for finish, or -1 when the log is
// full and ev was only counted.
func (l *audit) add(ev spec.NetworkEvent) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) >= maxEvents {
		l.dropped++
		l.lastDrop = time.Now()
		return -1
	}
	l.events = append(l.events, ev)
	return len(l.events) - 1
}

// finish sets the bytes an allowed connection moved when it ends, and
// appends a note (how it ended abnormally) to the reason.
func (l *audit) finish(i int, up, down int64, note string) {
	if i < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := &l.events[i]
	ev.BytesUp, ev.BytesDown = up, down
	if note != "" {
		ev.Reason += "; " + note
	}
}

// snapshot copies the log. When events were dropped, a last event says
// how many, so the count survives in a Result, which has no other field
// for it.
func (l *audit) snapshot() []spec.NetworkEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]spec.NetworkEvent(nil), l.events...)
	if l.dropped > 0 {
		out = append(out, spec.NetworkEvent{
			Time:   l.lastDrop.UTC().Format(time.RFC3339Nano),
			Reason: fmt.Sprintf("%d more events not recorded: the log keeps the first %d", l.dropped, maxEvents),
		})
	}
	return out
}
