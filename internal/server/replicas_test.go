package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// replicaKey is the tests' Replicas.Key.
var replicaKey = bytes.Repeat([]byte{7}, minReplicaKey)

func TestSessionOfPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/sessions":                   "",
		"/v1/sessions/":                  "",
		"/v1/sessions/ses_1":             "ses_1",
		"/v1/sessions/ses_1/exec/stream": "ses_1",
		"/v1/templates":                  "",
		"/mcp":                           "",
	} {
		if got := sessionOfPath(path); got != want {
			t.Errorf("%q: got %q, want %q", path, got, want)
		}
	}
}

// replicaPair is two servers over fakes as replicas: B sends every
// session it is asked for to holder (A's address unless a test says
// otherwise), and holds none itself.
type replicaPair struct {
	a, b       *harness
	aURL, bURL string
	aServer    *httptest.Server
	bServer    *httptest.Server
	holder     atomic.Pointer[netip.AddrPort]
	asked      atomic.Int32 // B's lookups of a holder
}

func newReplicaPair(t *testing.T) *replicaPair {
	return newReplicaPairOf(t, newHolder(t))
}

// newReplicaPairOf is newReplicaPair with a as A.
func newReplicaPairOf(t *testing.T, a *harness) *replicaPair {
	return newReplicaPairWith(t, a, 0)
}

// newReplicaPairWith is newReplicaPairOf with B probing its holders
// every probe (0: the default).
func newReplicaPairWith(t *testing.T, a *harness, probe time.Duration) *replicaPair {
	p := &replicaPair{a: a}
	p.b = newHarness(t, func(c *Config) {
		c.Replicas = &Replicas{Key: replicaKey, Holds: func(string, string) bool { return false }, ProbeEvery: probe,
			Holder: func(context.Context, string, string) (netip.AddrPort, error) {
				p.asked.Add(1)
				return *p.holder.Load(), nil
			}}
	})
	as, bs := httptest.NewServer(p.a.srv.Handler()), httptest.NewServer(p.b.srv.Handler())
	t.Cleanup(as.Close)
	t.Cleanup(bs.Close)
	p.aURL, p.bURL, p.aServer, p.bServer = as.URL, bs.URL, as, bs
	aAddr := netip.MustParseAddrPort(strings.TrimPrefix(as.URL, "http://"))
	p.holder.Store(&aAddr)
	return p
}

// newHolder is a server over a fake as a replica holding every session.
func newHolder(t *testing.T) *harness {
	return newHarness(t, func(c *Config) {
		c.Replicas = &Replicas{Key: replicaKey, Holds: func(string, string) bool { return true },
			Holder: func(context.Context, string, string) (netip.AddrPort, error) {
				t.Error("a holder asked for a holder: it holds every session")
				return netip.AddrPort{}, nil
			}}
	})
}

// post sends body to url with key keyA and extra headers, answering
// the response (the caller closes its body).
func post(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestReplicasForward: an exec at B of a session A holds runs at A, a
// client's own forwarded mark changes nothing, and a request A gets
// with a replica's mark is served at A, never forwarded again.
func TestReplicasForward(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	for _, header := range []map[string]string{nil, {ForwardedHeader: "forged"}} {
		resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["echo","hi"]}`, header)
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || p.a.fake.lastExec.Command[1] != "hi" {
			t.Errorf("exec at B with header %v: got %d %s, A's last exec %v; want 200 run at A", header, resp.StatusCode, data, p.a.fake.lastExec.Command)
		}
		p.a.fake.lastExec = sandbox.ExecRequest{}
	}
	if got := p.asked.Load(); got != 1 {
		t.Errorf("B's holder lookups: got %d, want 1 (the second request's holder remembered)", got)
	}
	// B, marked as forwarded, must serve it itself (its fake has no
	// such session, so 404), not ask for a holder.
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, map[string]string{ForwardedHeader: forwardMark(replicaKey, id)})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || p.asked.Load() != 1 {
		t.Errorf("a forwarded request at B: got %d after %d lookups, want 404 served at B with no lookup", resp.StatusCode, p.asked.Load())
	}
}

// TestReplicasMarkOut: B marks what it forwards. A, which here does
// not hold the session (it moved on) and whose lookup would name B,
// serves B's request itself, with no lookup and no forward back to B.
func TestReplicasMarkOut(t *testing.T) {
	var aAsked atomic.Int32
	a := newHarness(t, func(c *Config) {
		c.Replicas = &Replicas{Key: replicaKey, Holds: func(string, string) bool { return false },
			Holder: func(context.Context, string, string) (netip.AddrPort, error) {
				aAsked.Add(1)
				t.Error("A looked up a holder for a request B forwarded: B did not mark it")
				return netip.AddrPort{}, nil
			}}
	})
	p := newReplicaPairOf(t, a)
	id := p.a.create(keyA)
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["echo","marked"]}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(p.a.fake.lastExec.Command) != 2 || aAsked.Load() != 0 || p.asked.Load() != 1 {
		t.Errorf("exec forwarded B to A: got %d, A's last exec %v, A's lookups %d, B's %d; want 200 run at A, 0 and 1", resp.StatusCode, p.a.fake.lastExec.Command, aAsked.Load(), p.asked.Load())
	}
}

// TestReplicasTakeOver: a holder that refuses the dial is taken to be
// gone, and B serves the request itself, with its body whole.
func TestReplicasTakeOver(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	if got := p.b.create(keyA); got != id {
		t.Fatalf("B's fake made %q, want A's id %q", got, id)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	p.holder.Store(&gone)
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["echo","taken"]}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(p.b.fake.lastExec.Command) != 2 || p.b.fake.lastExec.Command[1] != "taken" {
		t.Errorf("exec at B with its holder gone: got %d, B's last exec %v; want 200 run at B", resp.StatusCode, p.b.fake.lastExec.Command)
	}
}

// fakeHolder is a holder at a loopback listener that accepts each
// connection and passes it to serve; it is closed at the test's end.
func fakeHolder(t *testing.T, serve func(net.Conn)) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for range 16 { // bounded: a test makes a few
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go serve(c)
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// TestReplicasHolderFails: a holder that takes the request and closes
// the connection without answering gets the client a 503 (a POST cannot
// be sent again), and is forgotten: the next request looks it up again.
func TestReplicasHolderFails(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	h := fakeHolder(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096)) // the request's start; its error is the test's outcome
		c.Close()
	})
	p.holder.Store(&h)
	for i := range 2 {
		resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("request %d with the holder failing: got %d, want 503", i, resp.StatusCode)
		}
	}
	if got := p.asked.Load(); got != 2 {
		t.Errorf("B's holder lookups: got %d, want 2 (a failed holder is forgotten)", got)
	}
}

// TestReplicasClientGone: a client that leaves while the holder works
// is no failure of the holder: B logs no warning and answers nothing.
func TestReplicasClientGone(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	got := make(chan struct{}, 1)
	h := fakeHolder(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096)) // the request's start; the test waits for it
		got <- struct{}{}
		_, _ = io.Copy(io.Discard, c) // until B drops the connection; nothing to check
	})
	p.holder.Store(&h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", p.bURL+"/v1/sessions/"+id+"/exec", strings.NewReader(`{"command":["true"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keyA)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-got:
	case <-time.After(time.Minute):
		t.Fatal("the request never reached the holder")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the client's request after it cancelled: got %v, want context.Canceled", err)
	}
	p.bServer.Close() // waits for B's handler to end
	if logs := p.b.logs.String(); strings.Contains(logs, "level=WARN") || strings.Contains(logs, "does not answer") {
		t.Errorf("B's logs after its client left: got\n%s\nwant no warning and no take-over", logs)
	}
}

// TestReplicasLookupFails: a holder lookup that fails (busy, the
// store's error) answers 503 at once, with nothing served at B; one
// finding the session missing lets B answer as it finds (404).
func TestReplicasLookupFails(t *testing.T) {
	var lookErr atomic.Pointer[error]
	b := newHarness(t, func(c *Config) {
		c.Replicas = &Replicas{Key: replicaKey, Holds: func(string, string) bool { return false },
			Holder: func(context.Context, string, string) (netip.AddrPort, error) {
				return netip.AddrPort{}, *lookErr.Load()
			}}
	})
	bs := httptest.NewServer(b.srv.Handler())
	defer bs.Close()
	id := b.create(keyA)
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"busy", fmt.Errorf("%w: no slot", sandbox.ErrBusy), http.StatusServiceUnavailable},
		{"the store's error", errors.New("apiserver: 429"), http.StatusServiceUnavailable},
		{"missing", fmt.Errorf("%w: gone", sandbox.ErrNotFound), http.StatusOK},
	} {
		lookErr.Store(&c.err)
		b.fake.lastExec = sandbox.ExecRequest{}
		resp := post(t, bs.URL+"/v1/sessions/"+id+"/exec", `{"command":["echo","here"]}`, nil)
		resp.Body.Close()
		ran := len(b.fake.lastExec.Command) != 0
		if resp.StatusCode != c.want || ran != (c.want == http.StatusOK) {
			t.Errorf("lookup %s: got %d, run at B %v; want %d, run at B only if 200", c.name, resp.StatusCode, ran, c.want)
		}
	}
}

// TestReplicasStream: a streamed exec's events reach the client through
// B as A writes them, not when the exec ends.
func TestReplicasStream(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	release := make(chan struct{})
	p.a.fake.exec = func(ctx context.Context, _ sandbox.ExecRequest, live sandbox.Stream) (spec.Result, error) {
		_, _ = io.WriteString(live.Stdout, "first\n")
		select {
		case <-release:
		case <-ctx.Done():
		case <-time.After(time.Minute): // bounded: the test failed
		}
		return spec.Result{Stdout: "first\n"}, nil
	}
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec/stream", `{"command":["true"]}`, nil)
	defer resp.Body.Close()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(resp.Body).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, "first") {
			t.Errorf("first event through B: got %q, want the stdout event", l)
		}
	case <-time.After(time.Minute):
		t.Error("no event through B while the exec at A runs: the stream is buffered")
	}
	close(release)
}

// TestReplicasHolderMoved: a remembered holder that no longer answers is
// looked up again, and the request goes to the session's new holder.
func TestReplicasHolderMoved(t *testing.T) {
	p := newReplicaPair(t)
	c := newHolder(t)
	cs := httptest.NewServer(c.srv.Handler())
	defer cs.Close()
	id := p.a.create(keyA)
	if got := c.create(keyA); got != id {
		t.Fatalf("C's fake made %q, want A's id %q", got, id)
	}
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, nil)
	resp.Body.Close()
	p.aServer.Close()
	moved := netip.MustParseAddrPort(strings.TrimPrefix(cs.URL, "http://"))
	p.holder.Store(&moved)
	resp = post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["echo","moved"]}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(c.fake.lastExec.Command) != 2 || p.asked.Load() != 2 {
		t.Errorf("exec at B after its holder moved: got %d, C's last exec %v, %d lookups; want 200 run at C after 2", resp.StatusCode, c.fake.lastExec.Command, p.asked.Load())
	}
}

// TestReplicasNoPrivilege: forwarding grants nothing. The holder checks
// the tenant's key on a forwarded request as on any (a replica's mark
// with a bad key is 401), another tenant's key does not reach the
// session through a mark (404 at A), nor through B, even were B's lookup
// to name A as the holder of another tenant's session.
func TestReplicasNoPrivilege(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	mark := map[string]string{ForwardedHeader: forwardMark(replicaKey, id)}
	for _, c := range []struct {
		name, url, key string
		header         map[string]string
		want           int
	}{
		{"a bad key with a replica's mark, at A", p.aURL, "wrong", mark, http.StatusUnauthorized},
		{"another tenant's key with a replica's mark, at A", p.aURL, keyB, mark, http.StatusNotFound},
		{"another tenant's key through B", p.bURL, keyB, nil, http.StatusNotFound},
	} {
		req, err := http.NewRequest("POST", c.url+"/v1/sessions/"+id+"/exec", strings.NewReader(`{"command":["echo","stolen"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		p.a.fake.mu.Lock()
		execs := p.a.fake.sessions[id].Info.Execs
		p.a.fake.mu.Unlock()
		if resp.StatusCode != c.want || execs != 0 {
			t.Errorf("%s: got %d, %d execs in A's session; want %d and none", c.name, resp.StatusCode, execs, c.want)
		}
	}
}

// TestReplicasBodyBound: a forwarded body is bounded as any, by the
// holder that reads it (B streams it, holding none of it): an exec body
// over DefaultMaxBodyBytes sent through B is forwarded and answered 413.
func TestReplicasBodyBound(t *testing.T) {
	p := newReplicaPair(t)
	id := p.a.create(keyA)
	code := strings.Repeat("x", int(DefaultMaxBodyBytes))
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"language":"python","code":"`+code+`"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || len(p.a.fake.lastExec.Code) != 0 || p.asked.Load() != 1 {
		t.Errorf("an exec body over the bound through B: got %d, A ran %d bytes of code, B looked up %d holders; want 413 from A (forwarded) and nothing run", resp.StatusCode, len(p.a.fake.lastExec.Code), p.asked.Load())
	}
}

// testProbe is the probe period of the hung-holder tests: short, so
// that they end soon; their waits are bounded apart from it.
const testProbe = 200 * time.Millisecond

// TestReplicasHolderHung: a holder whose kernel takes the connection
// but which answers nothing (the request nor the probes of its
// /healthz) gets the client a 503 saying so, not a wait until the
// client leaves, and is forgotten: the next request looks it up again.
func TestReplicasHolderHung(t *testing.T) {
	p := newReplicaPairWith(t, newHolder(t), testProbe)
	id := p.a.create(keyA)
	h := fakeHolder(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // reads, never answers, until B drops it; nothing to check
	})
	p.holder.Store(&h)
	client := &http.Client{Timeout: time.Minute} // a bound on the test, not the probe's
	for i := range 2 {
		req, err := http.NewRequest("POST", p.bURL+"/v1/sessions/"+id+"/exec", strings.NewReader(`{"command":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d to a hung holder: %v, want a 503 before the client gives up", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "does not answer") {
			t.Errorf("request %d to a hung holder: got %d %s, want 503 saying the holder does not answer", i, resp.StatusCode, body)
		}
	}
	if got := p.asked.Load(); got != 2 {
		t.Errorf("B's holder lookups: got %d, want 2 (a hung holder is forgotten)", got)
	}
}

// TestReplicasHolderSlow: a holder that takes many probe periods to
// answer a request but answers its probes is waited for: the request's
// answer comes through.
func TestReplicasHolderSlow(t *testing.T) {
	p := newReplicaPairWith(t, newHolder(t), testProbe)
	id := p.a.create(keyA)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			time.Sleep(10 * testProbe)
		}
		fmt.Fprint(w, "answered")
	}))
	t.Cleanup(slow.Close)
	h := netip.MustParseAddrPort(strings.TrimPrefix(slow.URL, "http://"))
	p.holder.Store(&h)
	resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "answered" {
		t.Errorf("a slow holder that answers its probes: got %d %s, want its 200 answered", resp.StatusCode, body)
	}
}

// TestReplicasHolderHungAfterHeaders: a holder that sends its answer's
// headers (a streamed exec does at once) and then hangs has the
// client's connection cut, and is forgotten all the same: the next
// request looks it up again.
func TestReplicasHolderHungAfterHeaders(t *testing.T) {
	p := newReplicaPairWith(t, newHolder(t), testProbe)
	id := p.a.create(keyA)
	h := fakeHolder(t, func(c net.Conn) {
		start := make([]byte, 64)
		n, _ := io.ReadAtLeast(c, start, len("GET /healthz")) // a short read is a request too; the test checks the outcome
		if !strings.HasPrefix(string(start[:n]), "GET /healthz") {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") // a failed write is a hung holder too
		}
		_, _ = io.Copy(io.Discard, c) // reads, answers nothing more, until B drops it; nothing to check
	})
	p.holder.Store(&h)
	client := &http.Client{Timeout: time.Minute} // a bound on the test, not the probe's
	for i := range 2 {
		req, err := http.NewRequest("POST", p.bURL+"/v1/sessions/"+id+"/exec/stream", strings.NewReader(`{"command":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d to a holder hung after its headers: %v, want its headers", i, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err == nil {
			t.Errorf("request %d to a holder hung after its headers: got %d and a body read error %v, want 200 then the connection cut", i, resp.StatusCode, err)
		}
	}
	if got := p.asked.Load(); got != 2 {
		t.Errorf("B's holder lookups: got %d, want 2 (a holder hung after its headers is forgotten)", got)
	}
}

// slowHolder is a holder whose answers to anything but /healthz take
// 10 probe periods, with healthz answering its probes.
func slowHolder(t *testing.T, healthz http.HandlerFunc) (netip.AddrPort, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			healthz(w, r)
			return
		}
		time.Sleep(10 * testProbe)
		fmt.Fprint(w, "answered")
	}))
	return netip.MustParseAddrPort(srv.Listener.Addr().String()), srv
}

// TestReplicasProbeAnswers: what a holder's /healthz answers is the
// probe's verdict alone: a redirect is an answer, not followed (whoever
// answers at a recorded address cannot send B's GETs elsewhere), and an
// answer with headers past maxProbeHeader is none.
func TestReplicasProbeAnswers(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	tests := []struct {
		name    string
		healthz http.HandlerFunc
		want    int
	}{
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL, http.StatusFound) }, http.StatusOK},
		{"huge headers", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Big", strings.Repeat("x", 2*maxProbeHeader))
		}, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			elsewhere.Store(0)
			p := newReplicaPairWith(t, newHolder(t), testProbe)
			id := p.a.create(keyA)
			h, srv := slowHolder(t, tt.healthz)
			srv.Start()
			t.Cleanup(srv.Close)
			p.holder.Store(&h)
			resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, nil)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || elsewhere.Load() != 0 {
				t.Errorf("a holder whose /healthz answers a %s: got %d %s with %d GETs elsewhere, want %d and none", tt.name, resp.StatusCode, body, elsewhere.Load(), tt.want)
			}
		})
	}
}

// TestReplicasProbeOneLoop: however many forwards to one holder are
// under way, B probes it by one loop, on one connection kept from probe
// to probe.
func TestReplicasProbeOneLoop(t *testing.T) {
	p := newReplicaPairWith(t, newHolder(t), testProbe)
	id := p.a.create(keyA)
	var probing, most, conns atomic.Int32
	h, srv := slowHolder(t, func(http.ResponseWriter, *http.Request) {
		if n := probing.Add(1); n > most.Load() {
			most.Store(n)
		}
		time.Sleep(testProbe / 10)
		probing.Add(-1)
	})
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p.holder.Store(&h)
	const forwards = 4
	var wg sync.WaitGroup
	for range forwards {
		wg.Go(func() {
			resp := post(t, p.bURL+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, nil)
			resp.Body.Close()
		})
	}
	wg.Wait()
	// A probe that takes over half a period on a loaded machine costs
	// its connection; a few are slack for that.
	if most.Load() > 1 || conns.Load() > forwards+3 {
		t.Errorf("%d forwards to one holder: %d probes at once at most over %d connections, want 1 at once over about %d (one per forward, one for the probes)", forwards, most.Load(), conns.Load(), forwards+1)
	}
}
