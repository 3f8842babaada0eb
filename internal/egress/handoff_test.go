package egress

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestLostHandOffIsTheServers: a connection handed over while the proxy
// is at its descriptor limit arrives without its descriptor; it must be
// recorded as the server's shortage, not parsed as a request starting
// with NUL and refused as the sandbox's bad request.
func TestLostHandOffIsTheServers(t *testing.T) {
	_, a := attach(t, Config{}, mustPolicy(t, []string{"allowed.test"}, nil))
	c, err := net.Dial("unix", a.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	handed, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer handed.Close()
	// Wait for the proxy to accept it: that takes a descriptor too.
	for i := 0; a.tracked() == 0; i++ {
		if i == 10000 {
			t.Fatal("the proxy did not accept the connection")
		}
		time.Sleep(time.Millisecond)
	}
	release := testhost.DenyFDs(t)
	_, _, err = uc.WriteMsgUnix([]byte{handoffMarker}, unix.UnixRights(int(handed.Fd())), nil)
	var events []spec.NetworkEvent
	for range 10000 {
		if events = a.Events(); len(events) > 0 || err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if err != nil {
		t.Fatalf("handing over a descriptor: %v", err)
	}
	if len(events) != 1 || events[0].Allowed || !strings.Contains(events[0].Reason, "out of file descriptors") {
		t.Errorf("events = %+v, want one saying the server is out of file descriptors", events)
	}
}

// tracked counts the attachment's open connections.
func (a *Attachment) tracked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.open)
}
