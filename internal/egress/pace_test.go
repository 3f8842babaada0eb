package egress

import (
	"context"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestAttachmentPacesConnections floods an attachment whose rate is next
// to nothing: exactly the burst is served, and the accept loop then waits
// for the next connection's turn, holding it unread and unanswered (no
// host CPU spent on it), while later ones wait in the socket's backlog.
func TestAttachmentPacesConnections(t *testing.T) {
	const burst = 3
	parked := make(chan time.Duration, 1)
	_, a := attachPaced(t, Config{}, mustPolicy(t, []string{"allowed.test"}, nil), Pace{Rate: 1e-6, Burst: burst},
		func(ctx context.Context, d time.Duration) error {
			parked <- d
			<-ctx.Done()
			return ctx.Err()
		})
	const refused = "CONNECT other.test:443 HTTP/1.1\r\n\r\n"
	for i := range burst {
		if status, _ := refusal(t, a, refused); status != 403 {
			t.Fatalf("connection %d of the burst: status %d, want 403", i, status)
		}
	}
	c, err := net.Dial("unix", a.SocketPath())
	if err != nil {
		t.Fatalf("dialing past the burst = %v, want the connection to wait", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, refused); err != nil {
		t.Fatal(err)
	}
	if d := <-parked; d <= 0 {
		t.Errorf("the wait for the connection past the burst is %v, want a positive wait", d)
	}
	var served, notes int
	for _, ev := range a.Events() {
		if strings.HasPrefix(ev.Reason, "connection pace reached") {
			notes++
			if !strings.Contains(ev.Reason, "after a burst of 3") || !strings.Contains(ev.Reason, "more cpus") {
				t.Errorf("pace note %q, want the burst and the way out", ev.Reason)
			}
			continue
		}
		served++
	}
	if served != burst || notes != 1 {
		t.Errorf("%d connections served and %d pace notes while the accept loop waits, want the burst of %d and 1 note", served, notes, burst)
	}
}

// TestNotePace: the pace note is logged when a connection spends the
// burst, once until a connection leaves a token again.
func TestNotePace(t *testing.T) {
	tests := []struct {
		spent []bool
		want  int
	}{
		{[]bool{false, false}, 0},
		{[]bool{false, true, true, true}, 1},
		{[]bool{true, false, true, true, false}, 2},
	}
	for _, tt := range tests {
		a := &Attachment{pace: Pace{Rate: 1, Burst: 5}.Limiter()}
		for _, spent := range tt.spent {
			a.notePace(spent)
		}
		if got := len(a.Events()); got != tt.want {
			t.Errorf("connections spending the burst %v: %d pace notes, want %d", tt.spent, got, tt.want)
		}
	}
}

// TestConnPace: 10 connections a second per core of quota, after a
// second's worth, at least 5; a Pace that is not positive and finite
// paces nothing.
func TestConnPace(t *testing.T) {
	tests := []struct {
		cpus float64
		want Pace
	}{
		{1, Pace{10, 10}},
		{0.1, Pace{1, 5}},
		{0.5, Pace{5, 5}},
		// A quota above the host's cores paces as the host's cores.
		{float64(runtime.NumCPU()) + 0.5, Pace{10 * float64(runtime.NumCPU()), 10 * runtime.NumCPU()}},
	}
	for _, tt := range tests {
		if got := ConnPace(tt.cpus); got != tt.want {
			t.Errorf("ConnPace(%g) = %+v, want %+v", tt.cpus, got, tt.want)
		}
	}
	for _, p := range []Pace{{}, {Rate: -1, Burst: 5}, {Rate: math.Inf(1), Burst: 5}, {Rate: math.NaN(), Burst: 5}} {
		if p.Limiter() != nil {
			t.Errorf("Pace%+v.Limiter() is not nil, want no pacing", p)
		}
	}
}
