package nsinit

import (
	"net"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestBridgePacesConnections floods a bridge whose pace is next to
// nothing: exactly the burst is handed on, then the loop waits for the
// next connection's turn, holding it, so nothing outside the sandbox's
// cgroup works for it or for the ones behind it in the backlog; once the
// wait is over it is handed on.
func TestBridgePacesConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const burst = 2
	handled := make(chan struct{}, burst+2)
	parked, resume := make(chan time.Duration), make(chan struct{})
	wait := func(d time.Duration) {
		parked <- d
		<-resume
	}
	go serveBridge(ln, rate.NewLimiter(1e-6, burst), wait, func(c net.Conn) {
		c.Close()
		handled <- struct{}{}
	})
	for range burst + 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if d := <-parked; d <= 0 {
		t.Errorf("the wait past the burst is %v, want a positive wait", d)
	}
	for range burst {
		<-handled
	}
	// The loop is parked: nothing more can have been handed on.
	if extra := len(handled); extra != 0 {
		t.Errorf("%d connections past the burst of %d were handed on while the loop waited", extra, burst)
	}
	resume <- struct{}{}
	<-handled
	if d := <-parked; d <= 0 {
		t.Errorf("the wait for the next connection is %v, want a positive wait", d)
	}
	close(resume)
}
