package server

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	c := dialSlowReader(t, ls.Listener.Addr().String())
	// Enough answers to fill any socket buffers many times over.
	req := "GET /openapi.yaml HTTP/1.1\r\nHost: warden.test\r\n\r\n"
	go func() { _, _ = io.WriteString(c, strings.Repeat(req, 2000)) }()
	waitFor(t, "the server to give up the connection", func() bool { return ls.closed.Load() > 0 })
}

// fakeWriter is a ResponseWriter that records the write deadlines set
// on it, as http.ResponseController finds them.
type fakeWriter struct {
	http.ResponseWriter
	set []time.Time
}

func (f *fakeWriter) SetWriteDeadline(t time.Time) error {
	f.set = append(f.set, t)
	return nil
}

// TestEveryWriteRenewsDeadline checks every write of an answer moves the
// write deadline to the timeout from that write, so a long answer (a
// download, an event stream) is bounded per write, not as a whole.
func TestEveryWriteRenewsDeadline(t *testing.T) {
	h := newHarness(t, nil)
	clock := time.Unix(1000, 0)
	fw := &fakeWriter{ResponseWriter: httptest.NewRecorder()}
	rec := &recorder{ResponseWriter: fw, timeout: time.Minute, now: func() time.Time { return clock }, s: h.srv}
	var want []time.Time
	for i := range 3 {
		clock = clock.Add(time.Duration(i+1) * time.Hour)
		if _, err := rec.Write([]byte("chunk")); err != nil {
			t.Fatal(err)
		}
		want = append(want, clock.Add(time.Minute))
	}
	if len(fw.set) != len(want) {
		t.Fatalf("set deadlines %v, want %v", fw.set, want)
	}
	for i := range want {
		if !fw.set[i].Equal(want[i]) {
			t.Errorf("write %d: deadline %v, want %v", i, fw.set[i], want[i])
		}
	}
}

// TestUnreadDownloadIsCut has a client start a large download and never
// read it, and checks the server gives up the connection and the
// transfer (and with it the open file).
func TestUnreadDownloadIsCut(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.StreamWriteTimeout = 100 * time.Millisecond })
	id := h.create(keyA)
	if resp := h.upload(id, "path=big", strings.Repeat("x", 32<<20)); resp.status != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.status, resp.body)
	}
	ls := h.serveLive()
	c := dialSlowReader(t, ls.Listener.Addr().String())
	if _, err := io.WriteString(c, "GET /v1/sessions/"+id+"/files?path=big HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer "+keyA+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the download to start", func() bool { return ls.active.Load() > 0 })
	waitFor(t, "the server to give up the download", func() bool { return ls.closed.Load() > 0 && h.srv.transfers.count(id) == 0 })
}

// dialSlowReader connects to addr with a 4 KiB receive buffer, so a
// client that reads nothing fills up at once; the test closes it.
func dialSlowReader(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	return c
}
