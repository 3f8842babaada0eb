package vmguest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestHelloRoundTrip(t *testing.T) {
	want := Hello{Version: Version, BootTime: 612 * time.Millisecond, HelloTime: 640 * time.Millisecond}
	b := want.Marshal()
	if len(b) != HelloSize {
		t.Fatalf("frame is %d bytes, want %d", len(b), HelloSize)
	}
	got, err := ReadHello(bytes.NewReader(append(b, "next protocol"...)))
	if err != nil || got != want {
		t.Errorf("ReadHello = %+v, %v; want %+v", got, err, want)
	}
}

// TestHostileHello feeds the host's parser what a hostile guest could
// send: each is refused with a one-line error naming what is wrong.
func TestHostileHello(t *testing.T) {
	good := Hello{Version: Version, BootTime: time.Second, HelloTime: time.Second}.Marshal()
	frame := func(version uint32, boot, hello int64) []byte {
		return Hello{Version: version, BootTime: time.Duration(boot), HelloTime: time.Duration(hello)}.Marshal()
	}
	tests := []struct {
		name  string
		frame []byte
		want  string
	}{
		{"empty", nil, "0 of 28 bytes"},
		{"short", good[:11], "11 of 28 bytes"},
		{"garbage", []byte("\x1b[2J\x1b]0;pwned\x07 not a hello at all"), `not "WRDNHELO"`},
		{"wrong version", frame(9, 1, 1), "version 9"},
		{"negative boot time", frame(Version, -1, 1), "implausible boot times"},
		{"hello before init", frame(Version, 2e9, 1e9), "implausible boot times"},
		{"huge boot time", frame(Version, 1, 1<<62), "implausible boot times"},
	}
	for _, tt := range tests {
		_, err := ReadHello(bytes.NewReader(tt.frame))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ReadHello = %v, want an error containing %q", tt.name, err, tt.want)
			continue
		}
		if strings.ContainsAny(err.Error(), "\x1b\x07\n") {
			t.Errorf("%s: error %q carries control characters from the guest", tt.name, err)
		}
	}
}

// TestOversizeHello shows a guest that sends more than a hello cannot make
// the host read more: the rest stays unread for the next protocol.
func TestOversizeHello(t *testing.T) {
	r := bytes.NewReader(append(Hello{Version: Version}.Marshal(), make([]byte, 1<<20)...))
	if _, err := ReadHello(r); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 1<<20 {
		t.Errorf("ReadHello consumed %d bytes beyond the frame", 1<<20-r.Len())
	}
}

// stallReader is a connection whose guest sent some bytes and then
// nothing until the read deadline passed, as a deadline-bounded net.Conn
// reports it, with no clock in the test.
type stallReader struct{ sent []byte }

func (s *stallReader) Read(p []byte) (int, error) {
	if len(s.sent) == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, s.sent)
	s.sent = s.sent[n:]
	return n, nil
}

// TestSlowHello shows a guest that trickles a hello and stops is cut off
// by the caller's read deadline with an error saying how far it got.
func TestSlowHello(t *testing.T) {
	_, err := ReadHello(&stallReader{sent: []byte(helloMagic[:3])})
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "3 of 28 bytes") {
		t.Errorf("ReadHello of a stalled guest = %v, want a deadline error after 3 bytes", err)
	}
	if errors.Is(err, io.EOF) {
		t.Error("a stall was reported as EOF")
	}
}

// FuzzReadHello: whatever a guest sends, the parser returns without
// panicking, reads at most one frame, and accepts only what it would send.
func FuzzReadHello(f *testing.F) {
	f.Add(Hello{Version: Version, BootTime: time.Second, HelloTime: 2 * time.Second}.Marshal())
	f.Add([]byte("WRDNHELO\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadHello(r)
		if read := len(b) - r.Len(); read > HelloSize {
			t.Fatalf("read %d bytes, over one frame", read)
		}
		if err == nil && !bytes.Equal(h.Marshal(), b[:HelloSize]) {
			t.Errorf("accepted %q as %+v, which marshals differently", b[:HelloSize], h)
		}
	})
}
