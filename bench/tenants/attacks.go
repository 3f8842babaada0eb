package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warden-sandbox/warden/bench/wardenserve"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// attacks are key B's hostile patterns, in the order.
func attacks() []attack {
	return []attack{
		{"1a slow bodies: Content-Length 8 MiB, then nothing", func(ctx context.Context, e *env) (func() string, error) { return slowBodies(e, false) }},
		{"1b slow bodies: chunked, then nothing", func(ctx context.Context, e *env) (func() string, error) { return slowBodies(e, true) }},
		{"2 session flood up to 429 (TTL 6 h, idle 1 h: the longest allowed)", sessionFlood},
		{"3 huge limits (64 GiB memory and disk, 1024 CPUs), spinning", hugeLimits},
		{"4 streamed yes, client stops reading", stalledStreams},
		{"5 output floods (yes, 1-byte writes)", outputFloods},
		{"6 refused egress connections (network proxy)", egressAttack},
		{"7 tiny execs in a tight loop", tinyExecAttack},
		{"8 unauthenticated slow-loris", slowLoris},
	}
}

// rampWait is how long an attack runs before A measures.
const rampWait = 500 * time.Millisecond

// heldConns are raw connections an attack keeps open; a reader records
// whatever status line the server answers on each before the end.
type heldConns struct {
	mu       sync.Mutex
	conns    []net.Conn
	answers  map[string]int
	wg       sync.WaitGroup
	failures int
	lastErr  string
}

func (h *heldConns) dial(addr, request string) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		if _, err = c.Write([]byte(request)); err != nil {
			if cerr := c.Close(); cerr != nil {
				log.Printf("closing a connection that failed: %v", cerr)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.failures++
		h.lastErr = err.Error()
		return
	}
	h.conns = append(h.conns, c)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil || line != "" {
			h.mu.Lock()
			h.answers[strings.TrimSpace(line)]++
			h.mu.Unlock()
		}
	}()
}

// close closes every connection and waits for the readers, which the
// close ends.
func (h *heldConns) close() string {
	h.mu.Lock()
	conns := h.conns
	h.mu.Unlock()
	for _, c := range conns {
		if err := c.Close(); err != nil {
			log.Printf("closing a held connection: %v", err)
		}
	}
	h.wg.Wait()
	s := fmt.Sprintf("%d connections held", len(conns))
	if h.failures > 0 {
		s += fmt.Sprintf(", %d failed (%s)", h.failures, h.lastErr)
	}
	if len(h.answers) > 0 {
		s += fmt.Sprintf("; answered before the end: %v", h.answers)
	}
	return s
}

// slowBodies (1): connections of key B that send a request's headers
// announcing a large body, then nothing.
func slowBodies(e *env, chunked bool) (func() string, error) {
	h := &heldConns{answers: map[string]int{}}
	framing := "Content-Length: 8388608"
	if chunked {
		framing = "Transfer-Encoding: chunked"
	}
	req := fmt.Sprintf("POST /v1/run HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n\r\n",
		e.t.srv.Addr, e.t.keyB, framing)
	for i := 0; i < e.o.slowBodies; i++ {
		h.dial(e.t.srv.Addr, req)
	}
	time.Sleep(rampWait)
	return h.close, nil
}

// slowLoris (8): many unauthenticated connections with a request that
// never ends, bounded by the file descriptors both sides have.
func slowLoris(ctx context.Context, e *env) (func() string, error) {
	n, why := lorisCount(e.o.loris, e.t.srv.Cmd.Process.Pid)
	h := &heldConns{answers: map[string]int{}}
	req := fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\n", e.t.srv.Addr)
	for i := 0; i < n; i++ {
		h.dial(e.t.srv.Addr, req)
	}
	time.Sleep(rampWait)
	return func() string { return h.close() + "; " + why }, nil
}

// sessions is B's sessions of one attack.
type sessions struct {
	mu  sync.Mutex
	ids []string
}

func (s *sessions) add(id string) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
}

func (s *sessions) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// createN makes up to n sessions of key B with opts. A 429 after the
// first ends the list early (a per-key share may be smaller than an
// attack asks), and says so in note; any other failure, or none made, is
// an error.
func createN(e *env, n int, opts map[string]any) (ids []string, note string, err error) {
	for i := 0; i < n; i++ {
		id, err := e.t.b.Create(opts)
		if err != nil && len(ids) > 0 && isStatus(err, http.StatusTooManyRequests) {
			return ids, fmt.Sprintf("; %d of %d sessions (then %v)", len(ids), n, err), nil
		}
		if err != nil {
			e.t.removeAll(ids)
			return nil, "", fmt.Errorf("creating key B's session %d of %d: %w", i+1, n, err)
		}
		ids = append(ids, id)
	}
	return ids, "", nil
}

// keyAGets creates sessions of key A, with the flood's life, until the
// server refuses one (or floodCap), removes them and says how many it got.
func keyAGets(e *env) string {
	var ids []string
	defer func() {
		for _, id := range ids {
			e.t.a.Remove(id)
		}
	}()
	for len(ids) < e.o.floodCap {
		id, err := e.t.a.Create(floodLife)
		if err != nil {
			return fmt.Sprintf("A then created %d sessions (1 more already held), then: %v", len(ids), err)
		}
		ids = append(ids, id)
	}
	return fmt.Sprintf("A then created %d sessions (cap %d) and was never refused", len(ids), e.o.floodCap)
}

func isStatus(err error, status int) bool {
	var ae *wardenserve.APIError
	return errors.As(err, &ae) && ae.Status == status
}

// floodLife is the life B's flood asks for each session: the longest
// that `warden serve`'s --max-ttl and --max-idle-timeout allow by
// default, so the server takes them and the flood meets the per-key
// share rather than a 400 for a life past the caps.
var floodLife = map[string]any{"ttl_seconds": sandbox.DefaultMaxTTL.Seconds(), "idle_timeout_seconds": sandbox.DefaultMaxIdle.Seconds()}

// sessionFlood (2): B creates long-lived sessions as fast as it can,
// first until the server answers 429 (or floodCap), then goes on asking
// while A measures. Once B is full, A creates sessions until it too is
// refused: what a key still gets beside a flooding one.
func sessionFlood(ctx context.Context, e *env) (func() string, error) {
	opts := floodLife
	var s sessions
	var refused, failed, made atomic.Int64
	var lastErr atomic.Value
	full := make(chan struct{})
	var once sync.Once
	rampStart := time.Now()
	wait := loop(ctx, 4, func(ctx context.Context, _ int) {
		if len(s.list()) >= e.o.floodCap {
			once.Do(func() { close(full) })
			time.Sleep(10 * time.Millisecond)
			return
		}
		// Not cancelled with ctx: a create cut short may still make a
		// session whose id B would never learn.
		id, err := e.t.b.Create(opts)
		switch {
		case err == nil:
			made.Add(1)
			s.add(id)
		case isStatus(err, http.StatusTooManyRequests):
			refused.Add(1)
			once.Do(func() { close(full) })
		default:
			failed.Add(1)
			lastErr.Store(err.Error())
			time.Sleep(10 * time.Millisecond)
		}
	})
	select {
	case <-full:
	case <-time.After(e.o.rampMax):
	}
	ramp := time.Since(rampStart)
	held := len(s.list())
	aCreate := keyAGets(e)
	return func() string {
		wait()
		ids := s.list()
		e.t.removeAll(ids)
		note := fmt.Sprintf("B held %d sessions after %.1f s (%d at the end, cap %d); %d creates, %d answered 429, %d other errors; %s",
			held, ramp.Seconds(), len(ids), e.o.floodCap, made.Load(), refused.Load(), failed.Load(), aCreate)
		if v, ok := lastErr.Load().(string); ok {
			note += "; last other error: " + v
		}
		return note
	}, nil
}

// hugeLimits (3): sessions asking for the largest limits the API
// accepts, each spinning two processes.
func hugeLimits(ctx context.Context, e *env) (func() string, error) {
	opts := map[string]any{"ttl_seconds": 600, "limits": map[string]any{
		"memory_bytes": int64(64) << 30, "disk_bytes": int64(64) << 30, "cpus": 1024}}
	var ids []string
	answers := map[string]int{}
	var effective string
	for i := 0; i < e.o.hugeSessions; i++ {
		var out struct {
			ID     string `json:"id"`
			Limits struct {
				Memory int64   `json:"memory_bytes"`
				Disk   int64   `json:"disk_bytes"`
				CPUs   float64 `json:"cpus"`
			} `json:"limits"`
		}
		err := e.t.b.Post("/v1/sessions", opts, &out)
		if err != nil {
			answers[err.Error()]++
			continue
		}
		ids = append(ids, out.ID)
		effective = fmt.Sprintf("memory %d MiB, disk %d MiB, %g cpus", out.Limits.Memory>>20, out.Limits.Disk>>20, out.Limits.CPUs)
	}
	spin := []string{"timeout", secs(e.programSecs()), "sh", "-c", "(while :; do :; done) & (while :; do :; done) & wait"}
	wait := execLoops(ctx, e, ids, func(int) []string { return spin })
	time.Sleep(rampWait)
	return func() string {
		wait()
		e.t.removeAll(ids)
		note := fmt.Sprintf("%d of %d accepted", len(ids), e.o.hugeSessions)
		if effective != "" {
			note += ", effective limits " + effective
		}
		if len(answers) > 0 {
			note += fmt.Sprintf("; refused: %v", answers)
		}
		return note
	}, nil
}

// execLoops runs prog(i) in session ids[i] again and again until ctx
// ends, each exec bounded by its timeout, and returns a wait.
func execLoops(ctx context.Context, e *env, ids []string, prog func(i int) []string) (wait func()) {
	return loop(ctx, len(ids), func(ctx context.Context, i int) {
		body := map[string]any{"command": prog(i), "timeout_seconds": e.programSecs() + 5}
		if err := e.t.b.Do(ctx, http.MethodPost, "/v1/sessions/"+ids[i]+"/exec", body, nil); err != nil && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// outputFloods (5): yes and 1-byte writes in B's sessions, two of each.
func outputFloods(ctx context.Context, e *env) (func() string, error) {
	ids, short, err := createN(e, 4, nil)
	if err != nil {
		return nil, err
	}
	wait := execLoops(ctx, e, ids, func(i int) []string {
		if i%2 == 0 {
			return yesFlood(e.programSecs())
		}
		return byteWrites(e.programSecs())
	})
	time.Sleep(rampWait)
	return func() string {
		wait()
		e.t.removeAll(ids)
		return "sessions alternate yes and 1-byte writes" + short
	}, nil
}

// egressAttack (6): connections refused by the egress proxy, as fast as
// two proxy sessions can open them.
func egressAttack(ctx context.Context, e *env) (func() string, error) {
	ids, short, err := createN(e, 2, map[string]any{"network": map[string]any{"mode": "proxy"}})
	if err != nil {
		return nil, err
	}
	wait := execLoops(ctx, e, ids, func(int) []string { return egressFlood(e.programSecs()) })
	time.Sleep(rampWait)
	return func() string { wait(); e.t.removeAll(ids); return fmt.Sprintf("%d proxy sessions%s", len(ids), short) }, nil
}

// tinyExecAttack (7): `true` as the exec of four sessions, back to back.
func tinyExecAttack(ctx context.Context, e *env) (func() string, error) {
	ids, short, err := createN(e, 4, nil)
	if err != nil {
		return nil, err
	}
	var n, failed atomic.Int64
	start := time.Now()
	wait := loop(ctx, len(ids), func(ctx context.Context, i int) {
		err := e.t.b.Do(ctx, http.MethodPost, "/v1/sessions/"+ids[i]+"/exec", map[string]any{"command": []string{"true"}}, nil)
		switch {
		case err == nil:
			n.Add(1)
		case ctx.Err() == nil:
			failed.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	})
	return func() string {
		wait()
		d := time.Since(start)
		e.t.removeAll(ids)
		return fmt.Sprintf("%d sessions, %d execs (%.0f/s), %d failed%s", len(ids), n.Load(), float64(n.Load())/d.Seconds(), failed.Load(), short)
	}, nil
}

// stalledStreams (4): B streams yes from two sessions and stops reading
// after the first bytes.
func stalledStreams(ctx context.Context, e *env) (func() string, error) {
	ids, short, err := createN(e, e.o.streams, nil)
	if err != nil {
		return nil, err
	}
	h := &heldConns{answers: map[string]int{}}
	body, err := json.Marshal(map[string]any{"command": yesFlood(e.programSecs()), "timeout_seconds": e.programSecs() + 5})
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		req := fmt.Sprintf("POST /v1/sessions/%s/exec/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", id, e.t.srv.Addr, e.t.keyB, len(body), body)
		// The reader takes the status line and stops reading there.
		h.dial(e.t.srv.Addr, req)
	}
	time.Sleep(rampWait)
	return func() string { note := h.close(); e.t.removeAll(ids); return note + short }, nil
}
