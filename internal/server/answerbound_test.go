package server

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUnreadBodyIsNotAwaited checks that an answer given before the
// request's body was read comes at once and frees the connection at once,
// however long BodyReadTimeout is: net/http must not first wait for the
// body to drain it, which let a stranger hold a busy connection for the
// whole timeout by declaring a body and sending none.
func TestUnreadBodyIsNotAwaited(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.BodyReadTimeout = time.Hour })
	ls := h.serveLive()
	tests := []struct {
		name   string
		raw    string
		status int
	}{
		{"no key, declared", stalledHead("wrong", "Content-Length: 1000"), http.StatusUnauthorized},
		{"no key, chunked", stalledHead("wrong", "Transfer-Encoding: chunked"), http.StatusUnauthorized},
		{"unknown path", "POST /v1/nothing HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer " + keyA +
			"\r\nContent-Length: 1000\r\n\r\n", http.StatusNotFound},
		{"handler takes no body", "GET /v1/sessions HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer " + keyA +
			"\r\nContent-Length: 1000\r\n\r\n", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ls.closed.Load()
			c := ls.dial(t, tt.raw)
			resp, e := readAnswer(t, c)
			if resp.StatusCode != tt.status {
				t.Errorf("got %d %q, want %d", resp.StatusCode, e.Error.Message, tt.status)
			}
			if !resp.Close {
				t.Error("the answer does not say Connection: close")
			}
			waitFor(t, "the server to close the connection", func() bool { return ls.closed.Load() > before })
		})
	}
}

// TestNonReaderIsCut has a keyless client pipeline requests for the spec
// and read none of the answers, and checks the server gives up its
// connection once an answer could not be written for the write timeout,
// rather than blocking on it forever.
func TestNonReaderIsCut(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StreamWriteTimeout = 100 * time.Millisecond })
	ls := h.serveLive()
	c, err := net.Dial("tcp", ls.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	// Enough answers to fill any socket buffers many times over.
	req := "GET /openapi.yaml HTTP/1.1\r\nHost: warden.test\r\n\r\n"
	go func() { _, _ = io.WriteString(c, strings.Repeat(req, 2000)) }()
	waitFor(t, "the server to give up the connection", func() bool { return ls.closed.Load() > 0 })
}

// fakeDeadline records the write deadlines set on it.
type fakeDeadline struct{ set []time.Time }

func (f *fakeDeadline) SetWriteDeadline(t time.Time) error {
	f.set = append(f.set, t)
	return nil
}

// TestDownloadRenewsDeadline checks every write of a download moves the
// write deadline to the timeout from that write's start, so a download
// is bounded per chunk, not as a whole.
func TestDownloadRenewsDeadline(t *testing.T) {
	clock := time.Unix(1000, 0)
	dl := &fakeDeadline{}
	rw := &renewingWriter{w: io.Discard, dl: dl, timeout: time.Minute, now: func() time.Time { return clock }}
	var want []time.Time
	for i := range 3 {
		clock = clock.Add(time.Duration(i+1) * time.Hour)
		if _, err := rw.Write([]byte("chunk")); err != nil {
			t.Fatal(err)
		}
		want = append(want, clock.Add(time.Minute))
	}
	if len(dl.set) != len(want) {
		t.Fatalf("set %d deadlines, want %d", len(dl.set), len(want))
	}
	for i := range want {
		if !dl.set[i].Equal(want[i]) {
			t.Errorf("write %d: deadline %v, want %v", i, dl.set[i], want[i])
		}
	}
}
