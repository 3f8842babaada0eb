package nsinit

import (
	"net"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/pace"
)

// TestBridgePacesAccepts floods a bridge whose pace is next to nothing:
// the burst is handed on, and the connection after it is not accepted
// (it waits in the listen backlog), so nothing outside the sandbox's
// cgroup works for it.
func TestBridgePacesAccepts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const burst = 2
	handled := make(chan struct{}, burst+1)
	go serveBridge(ln, pace.New(1e-6, burst), func(c net.Conn) {
		c.Close()
		handled <- struct{}{}
	})
	for range burst + 1 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for i := range burst {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d of the burst was not handled", i)
		}
	}
	// A slow host only makes this pass.
	select {
	case <-handled:
		t.Error("a connection past the burst was accepted and handed on")
	case <-time.After(300 * time.Millisecond):
	}
}
