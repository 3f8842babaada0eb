package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/metrics"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// testServer is an HTTP server behind a Listener of a small cap, over real
// loopback connections. GET /block (a tenant's request: it passes
// authentication) and GET /stranger (one that never does) are answered
// only once release is closed.
type testServer struct {
	t       *testing.T
	l       *Listener
	logs    *testhost.SyncBuffer
	entered chan struct{} // a /block request reached its handler
	release chan struct{}
	once    sync.Once
}

func newTestServer(t *testing.T, max int) *testServer {
	t.Helper()
	return newCappedServer(t, caps{conns: max, spare: max})
}

// newCappedServer is newTestServer with its own cap on unprotected
// connections.
func newCappedServer(t *testing.T, c caps) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, logs: &testhost.SyncBuffer{}, entered: make(chan struct{}, 64), release: make(chan struct{})}
	ts.l = newListener(ln, c, 1, slog.New(slog.NewTextHandler(ts.logs, nil)))
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/block":
				Authenticated(r.Context(), r.URL.Query().Get("tenant"))
				fallthrough
			case "/stranger":
				ts.entered <- struct{}{}
				<-ts.release
			}
			_, _ = io.WriteString(w, "ok")
		}),
		ReadHeaderTimeout: time.Minute,
	}
	done := make(chan error, 1)
	go func() { done <- ts.l.Serve(hs) }()
	t.Cleanup(func() {
		ts.unblock()
		hs.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

func (ts *testServer) unblock() { ts.once.Do(func() { close(ts.release) }) }

// dial opens a connection and waits until the listener has taken it.
func (ts *testServer) dial() net.Conn { return ts.dialFrom("127.0.0.1") }

// dialFrom opens a connection from a loopback address of its own, as if
// from another host.
func (ts *testServer) dialFrom(ip string) net.Conn {
	ts.t.Helper()
	before := ts.l.Stats().Accepted
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", ts.l.Addr().String())
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { c.Close() })
	ts.waitFor("the connection to be accepted", func() bool { return ts.l.Stats().Accepted > before })
	return c
}

// get sends GET path on c, and for any path but /block reads the answer.
func (ts *testServer) get(c net.Conn, path string) {
	ts.t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		ts.t.Fatalf("sending GET %s: %v", path, err)
	}
	if strings.HasPrefix(path, "/block") || path == "/stranger" {
		select {
		case <-ts.entered:
		case <-time.After(time.Minute):
			ts.t.Fatal("the /block request never reached its handler")
		}
		return
	}
	if status := answer(ts.t, c); status != http.StatusOK {
		ts.t.Fatalf("GET %s: got %d, want 200", path, status)
	}
}

// answer reads one answer from c, waiting at most a minute, and returns
// its status, or 0 when the connection was closed instead.
func answer(t *testing.T, c net.Conn) int {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("no answer within a minute: %v", err)
		}
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp.StatusCode
}

// idleConns is how many keep-alive connections l holds as idle. A test
// waits for this, not for a connection to be spare at all: the client
// reads its answer before http.Server reports the connection idle, and
// until then it is pending, which a new connection evicts before any
// idle one.
func (ts *testServer) idleConns() int {
	ts.l.mu.Lock()
	defer ts.l.mu.Unlock()
	return ts.l.spare[idle].all.Len()
}

func (ts *testServer) waitFor(what string, cond func() bool) {
	ts.t.Helper()
	testhost.WaitFor(ts.t, what, cond)
}

// closed says whether the server closed c, waiting at most a minute.
func closed(t *testing.T, c net.Conn) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestEvictsLongestWaiting fills the cap with a half-open connection, an
// idle keep-alive one and one with a request in flight, and checks each
// new connection evicts the one without a request that has waited
// longest, and the request in flight is answered.
func TestEvictsLongestWaiting(t *testing.T) {
	ts := newTestServer(t, 3)
	halfOpen := ts.dial()
	idle := ts.dial()
	ts.get(idle, "/")
	busy := ts.dial()
	ts.get(busy, "/block")
	ts.waitFor("the keep-alive connection to be idle", func() bool { return ts.idleConns() == 1 })

	first := ts.dial()
	if !closed(t, halfOpen) {
		t.Error("the half-open connection, the longest waiting, was not evicted")
	}
	ts.get(first, "/")
	ts.waitFor("the new connection to be idle too", func() bool { return ts.idleConns() == 2 })
	second := ts.dial()
	if !closed(t, idle) {
		t.Error("the idle keep-alive connection was not evicted next")
	}
	ts.get(second, "/")
	ts.unblock()
	if status := answer(t, busy); status != http.StatusOK {
		t.Errorf("the request in flight during the evictions: got %d, want 200", status)
	}
	if st := ts.l.Stats(); st.Open != 3 || st.Evicted != 2 || st.Refused != 0 || st.Accepted != 5 {
		t.Errorf("stats: got %+v, want 3 open, 5 accepted, 2 evicted, none refused", st)
	}
}

// TestEvictsOwnHostsFirst checks a host's new connection evicts that
// host's own spare connections before another host's older one, so a
// host flooding the server does not take other hosts' places.
func TestEvictsOwnHostsFirst(t *testing.T) {
	ts := newTestServer(t, 2)
	other := ts.dialFrom("127.0.0.1")
	flooder := ts.dialFrom("127.0.0.2")
	for i := range 5 {
		next := ts.dialFrom("127.0.0.2")
		if !closed(t, flooder) {
			t.Fatalf("flood connection %d: the flooder's own older connection was not evicted", i)
		}
		flooder = next
	}
	third := ts.dialFrom("127.0.0.3")
	if !closed(t, other) {
		t.Error("a host without spare connections did not evict the longest waiting one")
	}
	ts.get(third, "/")
	ts.get(flooder, "/")
}

// TestRefusesWhenAllBusy checks a connection that finds every other one
// with a request in flight is closed, those requests are answered, and
// the place of a closed connection is free again.
func TestRefusesWhenAllBusy(t *testing.T) {
	ts := newTestServer(t, 2)
	var busy []net.Conn
	for range 2 {
		c := ts.dial()
		ts.get(c, "/block")
		busy = append(busy, c)
	}
	late := ts.dial()
	if status := answer(t, late); status != http.StatusServiceUnavailable {
		t.Errorf("a connection over the cap with every other one busy: got %d, want 503", status)
	}
	if !closed(t, late) {
		t.Error("a connection over the cap with every other one busy was not closed")
	}
	ts.unblock()
	for i, c := range busy {
		if status := answer(t, c); status != http.StatusOK {
			t.Errorf("busy request %d: got %d, want 200", i, status)
		}
		c.Close()
	}
	ts.waitFor("the closed connections to be forgotten", func() bool { return ts.l.Stats().Open == 0 })
	ts.get(ts.dial(), "/")
	if st := ts.l.Stats(); st.Refused != 1 || st.Evicted != 0 {
		t.Errorf("stats: got %+v, want 1 refused, none evicted", st)
	}
}

// TestEvictionLogIsRateLimited floods a full listener and checks the log
// says so at most once a second.
func TestEvictionLogIsRateLimited(t *testing.T) {
	const flood = 50
	ts := newTestServer(t, 1)
	ts.get(ts.dial(), "/block")
	start := time.Now()
	for range flood {
		c := ts.dial()
		c.Close()
	}
	elapsed := time.Since(start)
	lines := strings.Count(ts.logs.String(), "connection limit reached")
	if lines < 1 || lines > 1+int(elapsed/time.Second) {
		t.Errorf("%d refusals in %v logged %d lines, want 1 to %d:\n%s", flood, elapsed, lines, 1+int(elapsed/time.Second), ts.logs)
	}
	if st := ts.l.Stats(); st.Refused != flood {
		t.Errorf("refused %d, want %d", st.Refused, flood)
	}
}

// TestCapFor: the cap is what the limit leaves beside the reserve, and
// below the limit that keeps the reserve whole it still holds one
// connection per sandbox (so a burst of one-shot runs as large as
// --max-sessions is served), taking at most half of what the server's
// base leaves, and minConns at least; but the connections no tenant's
// request protects stay within what the limit leaves beside the whole
// reserve (minConns at least), and figures that would overflow saturate.
func TestCapFor(t *testing.T) {
	r := Reserve{Sandboxes: 64, PerSandbox: 200}
	// The harness's server on a host whose hard RLIMIT_NOFILE is 20000:
	// --max-sessions 1024 and --pool 8, 745 descriptors per sandbox.
	burst := Reserve{Sandboxes: 1024 + 8, PerSandbox: 745}
	huge := Reserve{Sandboxes: 1 << 40, PerSandbox: 1 << 40}
	tests := []struct {
		name   string
		nofile uint64
		r      Reserve
		want   caps
	}{
		{"reserve kept whole", 20000, r, caps{20000 - base - 64*200, 20000 - base - 64*200, base + 64*200 + minConns}},
		{"high limit", 1 << 20, Reserve{8, 200}, caps{1<<20 - base - 8*200, 1<<20 - base - 8*200, base + 8*200 + minConns}},
		{"reserve kept whole beside one connection per sandbox", base + 100*10 + 100, Reserve{100, 10}, caps{100, 100, base + 100*10 + 100}},
		{"one short of it", base + 100*10 + 99, Reserve{100, 10}, caps{100, 99, base + 100*10 + 100}},
		{"burst of 1032 sandboxes at 20000", 20000, burst, caps{1032, minConns, base + 1032*745 + 1032}},
		{"low limit: half of what base leaves", 1500, burst, caps{(1500 - base) / 2, minConns, base + 1032*745 + 1032}},
		{"review: --max-sessions 150 --pool 8 at 600", 600, Reserve{158, 745}, caps{158, minConns, base + 158*745 + 158}},
		{"low limit, few sandboxes", 1024, r, caps{minConns, minConns, base + 64*200 + minConns}},
		{"at the floor", base + 200 + minConns, Reserve{1, 200}, caps{minConns, minConns, base + 200 + minConns}},
		{"below it", base + 200 + minConns - 1, Reserve{1, 200}, caps{minConns, minConns, base + 200 + minConns}},
		{"below base", 100, burst, caps{minConns, minConns, base + 1032*745 + 1032}},
		{"no limit read", 0, Reserve{1, 200}, caps{minConns, minConns, base + 200 + minConns}},
		{"reserve's product overflows", 20000, huge, caps{(20000 - base) / 2, minConns, math.MaxUint64}},
		{"reserve plus floor overflows", 20000, Reserve{maxInt, 1}, caps{(20000 - base) / 2, minConns, math.MaxUint64}},
		{"negative figures count as none", 20000, Reserve{-1, -1}, caps{20000 - base, 20000 - base, base + minConns}},
	}
	for _, tt := range tests {
		got := capFor(tt.nofile, tt.r)
		if got != tt.want {
			t.Errorf("%s: capFor(%d, %+v) = %+v; want %+v", tt.name, tt.nofile, tt.r, got, tt.want)
		}
		if d := tt.r.descriptors(); tt.nofile >= d+minConns && d < math.MaxUint64-minConns && uint64(got.spare) > tt.nofile-d {
			t.Errorf("%s: %d unprotected connections eat into the reserve: the limit %d leaves only %d beside it", tt.name, got.spare, tt.nofile, tt.nofile-d)
		}
	}
}

// TestStrangersHoldOnlyTheirCap fills a listener whose floor (4) is above
// what the reserve leaves for connections (2) with a stranger's keyless
// connections, and checks it holds only 2 of them, so the descriptors
// the reserve keeps stay the sandboxes', while tenants' requests still
// reach the floor.
func TestStrangersHoldOnlyTheirCap(t *testing.T) {
	ts := newCappedServer(t, caps{conns: 4, spare: 2})
	var strangers []net.Conn
	for range 4 {
		strangers = append(strangers, ts.dialFrom("127.0.0.2"))
	}
	for i, c := range strangers[:2] {
		if !closed(t, c) {
			t.Errorf("stranger's connection %d of 4 was held past the cap of 2 unprotected ones", i+1)
		}
	}
	if got := ts.l.Stats().Open; got != 2 {
		t.Errorf("connections held after 4 keyless ones: got %d, want 2", got)
	}
	for i := range 4 {
		ts.get(ts.dialFrom("127.0.0.1"), fmt.Sprintf("/block?tenant=t%d", i))
	}
	if got := ts.l.Stats().Open; got != 4 {
		t.Errorf("connections held with 4 tenants' requests in flight: got %d, want 4", got)
	}
}

// TestStrangersAreEvictable checks a request that never passed
// authentication does not protect its connection: at the cap a new
// connection evicts it, while a tenant's request in flight is kept.
func TestStrangersAreEvictable(t *testing.T) {
	ts := newTestServer(t, 2)
	tenant := ts.dialFrom("127.0.0.1")
	ts.get(tenant, "/block")
	stranger := ts.dialFrom("127.0.0.2")
	ts.get(stranger, "/stranger")
	next := ts.dialFrom("127.0.0.3")
	if !closed(t, stranger) {
		t.Error("the stranger's busy connection was not evicted")
	}
	ts.unblock()
	if status := answer(t, tenant); status != http.StatusOK {
		t.Errorf("the tenant's request in flight: got %d, want 200", status)
	}
	ts.get(next, "/")
}

// TestEvictsPendingBeforeIdle checks a new connection evicts one still
// sending its headers before an idle keep-alive one that waited longer,
// whose tenant's next request may be on its way.
func TestEvictsPendingBeforeIdle(t *testing.T) {
	ts := newTestServer(t, 2)
	idle := ts.dialFrom("127.0.0.1")
	ts.get(idle, "/")
	ts.waitFor("the keep-alive connection to be idle", func() bool { return ts.idleConns() == 1 })
	halfOpen := ts.dialFrom("127.0.0.2")
	next := ts.dialFrom("127.0.0.3")
	if !closed(t, halfOpen) {
		t.Error("the half-open connection was not evicted before the idle one")
	}
	ts.get(idle, "/")
	ts.get(next, "/")
}

// TestPeerOf checks the host a connection is put with, and that an
// address the listener cannot tell does not panic in the accept loop.
func TestPeerOf(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{nil, ""},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 9}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 9}, "2001:db8:1:2::"},
		{&net.UnixAddr{Name: "@x", Net: "unix"}, "@x"},
	}
	for _, tt := range tests {
		if got := peerOf(tt.addr); got != tt.want {
			t.Errorf("peerOf(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

// TestCollectors checks the listener's series say what its Stats do.
func TestCollectors(t *testing.T) {
	ts := newTestServer(t, 1)
	ts.get(ts.dial(), "/block")
	if status := answer(t, ts.dial()); status != http.StatusServiceUnavailable {
		t.Fatalf("over the cap: got %d, want 503", status)
	}
	reg := metrics.NewRegistry()
	if err := reg.Register(ts.l.Collectors()...); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if _, err := reg.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`warden_connections{state="open"} 1`, "warden_connections_max 1",
		"warden_connections_evicted_total 0", "warden_connections_refused_total 1",
		"# TYPE warden_connections_refused_total counter",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, out.String())
		}
	}
}

// TestTenantProtectsItsShare checks one tenant's requests protect at most
// its share of the cap: its request past the share stays evictable, and
// the protection ends with the request.
func TestTenantProtectsItsShare(t *testing.T) {
	ts := newTestServer(t, 4)
	ts.l.perTenant = 2 // the cap of 4 shared by 2 tenants
	var held []net.Conn
	for range 3 {
		c := ts.dialFrom("127.0.0.1")
		ts.get(c, "/block?tenant=a")
		held = append(held, c)
	}
	other := ts.dialFrom("127.0.0.2")
	ts.get(other, "/block?tenant=b")
	newcomer := ts.dialFrom("127.0.0.3")
	if !closed(t, held[2]) {
		t.Error("the tenant's request past its share of protected connections was not evicted")
	}
	ts.unblock()
	for i, c := range append(held[:2], other) {
		if status := answer(t, c); status != http.StatusOK {
			t.Errorf("protected request %d: got %d, want 200", i, status)
		}
	}
	ts.waitFor("the protections to end with their requests", func() bool {
		ts.l.mu.Lock()
		defer ts.l.mu.Unlock()
		return len(ts.l.protected) == 0
	})
	ts.get(newcomer, "/")
}

// TestShortage checks the start-up warning advises raising the limit
// only as far as the process may, and otherwise the --max-sessions that
// fits, and names --max-connections.
func TestShortage(t *testing.T) {
	burst := Reserve{Sandboxes: 1024 + 8, PerSandbox: 745}
	tests := []struct {
		name   string
		nofile uint64
		most   uint64
		r      Reserve
		pool   int
		want   string
	}{
		{"root may raise it to fs.nr_open", 20000, 1 << 20, burst, 8, "raise it to 770128 or more (ulimit -n 770128"},
		{"past the hard limit", 20000, 20000, burst, 8, "lower --max-sessions to 18 or less beside --pool 8"},
		{"past fs.nr_open", 1 << 20, 1 << 20, Reserve{100000, 745}, 0, "lower --max-sessions to 1405 or less beside --pool 0"},
		{"not even one sandbox fits", 600, 600, Reserve{158, 745}, 8, "keeps no sandbox's reserve beside --pool 8: lower --pool or raise the hard limit"},
	}
	for _, tt := range tests {
		got := shortage(tt.nofile, tt.most, tt.r, tt.pool, capFor(tt.nofile, tt.r))
		if !strings.Contains(got, tt.want) || !strings.Contains(got, "--max-connections") {
			t.Errorf("%s: shortage(%d, %d, %+v, %d) = %q; want it to contain %q and --max-connections", tt.name, tt.nofile, tt.most, tt.r, tt.pool, got, tt.want)
		}
	}
}

// TestKeylessServerHasNoStrangers checks a keyless server lets its
// unprotected connections reach the floor (any client may run sandboxes,
// and a burst's connections are unprotected until they reach a handler),
// while a server with keys caps them below it.
func TestKeylessServerHasNoStrangers(t *testing.T) {
	r := Reserve{Sandboxes: 1 << 20, PerSandbox: 745} // past any limit
	for _, keyless := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		st := ForSandboxes(ln, Options{Reserve: r, Keyless: keyless, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Stats()
		if err := ln.Close(); err != nil {
			t.Error(err)
		}
		if got := st.MaxSpare == st.Max; got != keyless || st.MaxSpare < minConns {
			t.Errorf("keyless %v: unprotected cap %d, cap %d; want them equal only without keys, and %d at least", keyless, st.MaxSpare, st.Max, minConns)
		}
	}
}
