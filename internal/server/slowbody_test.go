package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// liveServer serves h over real loopback connections and counts those
// with a request in flight, so a test can wait until its stalled requests
// have all reached the server.
type liveServer struct {
	*httptest.Server
	active, closed atomic.Int64
}

func (h *harness) serveLive() *liveServer {
	h.t.Helper()
	ls := &liveServer{Server: httptest.NewUnstartedServer(h.srv.Handler())}
	ls.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateActive:
			ls.active.Add(1)
		case http.StateClosed:
			ls.closed.Add(1)
		}
	}
	ls.Start()
	h.t.Cleanup(ls.Close)
	return ls
}

// dial opens a connection to the server and writes raw, then leaves it
// open: the start of a request whose rest never comes.
func (ls *liveServer) dial(t *testing.T, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ls.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor waits for work the server does in goroutines a test cannot
// join (testhost.WaitFor).
var waitFor = testhost.WaitFor

// stalledHead is the head of a POST /v1/run by key with the given framing
// header, whose body the caller sends (some of) or not.
func stalledHead(key, framing string) string {
	return "POST /v1/run HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\n" + framing + "\r\n\r\n"
}

// TestStalledBodiesLeaveOthersRoom has key B open many requests that
// declare large bodies and then stall, and checks key A's small request
// is still served: a body holds what has arrived, within its key's share,
// not what it declared.
func TestStalledBodiesLeaveOthersRoom(t *testing.T) {
	const maxBody, total, conns = 64 << 10, 256 << 10, 8
	tests := []struct {
		name    string
		framing string
		sent    string
		held    int64 // what B's requests hold at least, once all have arrived
	}{
		{"declared, nothing sent", fmt.Sprintf("Content-Length: %d", maxBody), "", conns * firstCharge},
		{"chunked, nothing sent", "Transfer-Encoding: chunked", "", conns * firstCharge},
		{"declared, all but a byte sent", fmt.Sprintf("Content-Length: %d", maxBody),
			`{"command":["true"],"stdin":"` + strings.Repeat("x", maxBody-32), total / 4},
		{"chunked, a body's worth sent", "Transfer-Encoding: chunked",
			fmt.Sprintf("%x\r\n%s\r\n", maxBody-1, strings.Repeat(" ", maxBody-1)), total / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MaxBodyBytes, c.MaxInFlightBodyBytes = maxBody, total })
			ls := h.serveLive()
			for range conns {
				ls.dial(t, stalledHead(keyB, tt.framing)+tt.sent)
			}
			waitFor(t, "key B's requests to arrive", func() bool {
				return ls.active.Load() >= conns && h.srv.bodies.heldBy(ownerOf(keyB)) >= tt.held
			})
			if got := h.srv.bodies.heldBy(ownerOf(keyB)); got > total/2 {
				t.Errorf("key B holds %d bytes, more than its share of %d", got, total/2)
			}
			resp := postJSON(t, ls.URL+"/v1/sessions", keyA, "{}")
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("key A's create while key B stalls: got %d, want 201", resp.StatusCode)
			}
		})
	}
}

// postJSON sends a JSON body with key and returns the answer, its body
// read and closed.
func postJSON(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp
}

// readAnswer reads the answer to the request on c, waiting at most a
// minute.
func readAnswer(t *testing.T, c net.Conn) (*http.Response, errorBody) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	var e errorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp, e
}

// TestStalledBodyTimesOut checks a body that stops arriving is cut off at
// BodyReadTimeout with 408, its charge given back and its connection
// closed, wherever it stalls: a JSON body, an upload, a body the handler
// never reads, a mounted handler's body, a body of a request without a
// valid key.
func TestStalledBodyTimesOut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	h := newHarness(t, func(c *Config) {
		c.BodyReadTimeout = timeout
		c.Mount = map[string]http.Handler{"/mcp": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				t.Errorf("the mounted handler got a body that failed: %v", err)
			}
			w.WriteHeader(http.StatusAccepted)
		})}
	})
	id := h.create(keyA)
	ls := h.serveLive()
	mcp := "POST /mcp HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer " + keyA +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
	upload := "PUT /v1/sessions/" + id + "/files?path=f HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer " + keyA +
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\npartial"
	list := "GET /v1/sessions HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer " + keyA +
		"\r\nContent-Length: 1000\r\n\r\n"
	tests := []struct {
		name   string
		raw    string
		status int
		code   string
	}{
		{"declared JSON", stalledHead(keyA, "Content-Length: 100") + `{"command":`, http.StatusRequestTimeout, codeTimeout},
		{"chunked JSON", stalledHead(keyA, "Transfer-Encoding: chunked") + "5\r\n{\"com", http.StatusRequestTimeout, codeTimeout},
		{"upload", upload, http.StatusRequestTimeout, codeTimeout},
		{"unread body", list, http.StatusOK, ""},
		{"mounted handler's body", mcp, http.StatusRequestTimeout, codeTimeout},
		{"no key", stalledHead("wrong", "Content-Length: 100000"), http.StatusUnauthorized, codeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ls.dial(t, tt.raw)
			resp, e := readAnswer(t, c)
			if resp.StatusCode != tt.status || e.Error.Code != tt.code {
				t.Errorf("got %d %q %q, want %d %q", resp.StatusCode, e.Error.Code, e.Error.Message, tt.status, tt.code)
			}
			if tt.code == codeTimeout && !strings.HasPrefix(e.Error.Message, "request body did not arrive in time: ") {
				t.Errorf("message %q does not say the body came too slowly", e.Error.Message)
			}
			// The server closes the connection rather than wait on.
			if n, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Errorf("after the answer the connection gave %d bytes, %v; want it closed", n, err)
			}
			if n := h.srv.bodies.heldBy(ownerOf(keyA)); n != 0 {
				t.Errorf("the stalled body still holds %d bytes", n)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestTwoBodiesOfOneKey sends two bodies of one key that together need
// its whole share, each first in part and the rest once both are
// charged: both must be served, not each hold half the share and wait
// for the other until one is refused.
func TestTwoBodiesOfOneKey(t *testing.T) {
	const share, size, first = 64 << 10, 60 << 10, 20 << 10
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes, c.MaxInFlightBodyBytes = share, share })
	ls := h.serveLive()
	body := `{"command":["true"],"stdin":"` + strings.Repeat("x", size-32) + `"}`
	var conns []net.Conn
	for range 2 {
		conns = append(conns, ls.dial(t, stalledHead(keyA, fmt.Sprintf("Content-Length: %d", len(body)))+body[:first]))
	}
	waitFor(t, "both bodies to be charged", func() bool { return h.srv.bodies.heldBy(ownerOf(keyA)) >= share-4*firstCharge })
	for i, c := range conns {
		if _, err := io.WriteString(c, body[first:]); err != nil {
			t.Fatalf("body %d: %v", i, err)
		}
	}
	for i, c := range conns {
		if resp, e := readAnswer(t, c); resp.StatusCode != http.StatusOK {
			t.Errorf("body %d: got %d %q, want 200", i, resp.StatusCode, e.Error.Message)
		}
	}
}
