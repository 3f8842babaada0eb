package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestAttachmentPacesConnections floods an attachment whose rate is next
// to nothing: the burst is served, and the connection after it waits in
// the socket's backlog, neither read nor answered (no host CPU spent on
// it), rather than being refused at the host's expense.
func TestAttachmentPacesConnections(t *testing.T) {
	const rate = 1e-6
	_, a := attachPaced(t, Config{}, mustPolicy(t, []string{"allowed.test"}, nil), rate)
	burst := int(ConnBurst(rate))
	const refused = "CONNECT other.test:443 HTTP/1.1\r\n\r\n"
	for i := range burst {
		if status, _ := refusal(t, a, refused); status != 403 {
			t.Fatalf("connection %d of the burst: status %d, want 403", i, status)
		}
	}
	c, err := net.Dial("unix", a.SocketPath())
	if err != nil {
		t.Fatalf("dialing past the burst = %v, want the connection to wait in the backlog", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, refused); err != nil {
		t.Fatal(err)
	}
	// Not served: no answer comes. A slow host only makes this pass.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(make([]byte, 64))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection past the burst got %d bytes, %v; want no answer", n, err)
	}
	if got := len(a.Events()); got != burst {
		t.Errorf("%d connections served, want the burst of %d", got, burst)
	}
}
