package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Replicas lets several servers serve one backend's sessions (the
// kubernetes backend's router replicas): a request for a session this
// server does not hold, which another live replica does, is forwarded
// there, as only the holder reaches the session's sandbox.
type Replicas struct {
	// Key is shared by every replica (the router key): it proves a
	// forwarded request came from a replica, so that one is never
	// forwarded again, whatever a client sends.
	Key []byte
	// Holds is whether this server holds owner's session id itself.
	Holds func(owner, id string) bool
	// Holder is the address of the live replica holding owner's session
	// id as the backend records it, the zero AddrPort to serve it here
	// (none recorded, or this server's own).
	Holder func(ctx context.Context, owner, id string) (netip.AddrPort, error)
	// DialTimeout bounds the dial of the holder (DefaultHolderDial): one
	// that does not answer within it is taken to be gone, and this server
	// takes the session over.
	DialTimeout time.Duration
	// ProbeEvery is how often a holder with forwards under way is asked
	// its /healthz, whether it still answers (DefaultHolderProbe), each
	// probe bounded by half of it: a holder whose kernel takes the
	// connection but whose process serves no HTTP (stopped, frozen)
	// fails its forwards after holderProbeMisses probes in a row go
	// unanswered, rather than holding them until their clients leave.
	// /healthz touches no session, so a holder whose HTTP server runs
	// but whose session handling is stuck is not told.
	ProbeEvery time.Duration
}

// HolderBackend is a backend whose sessions one server replica of
// several holds at a time (kubernetes), recording the holder's address
// where the others look it up.
type HolderBackend interface {
	// Holder is Replicas.Holder, unbounded.
	Holder(ctx context.Context, owner, id string) (netip.AddrPort, error)
	// ForwardKey is Replicas.Key.
	ForwardKey() []byte
}

// ReplicasOf is how a server of m forwards a request for a session
// another replica holds, for a HolderBackend b; nil for other backends.
// The holder's lookup runs under m's bounds on lookups of sessions it
// does not hold (GuardLookup), so that a tenant's unknown ids cost the
// backend's store no more through forwarding than without.
func ReplicasOf(b sandbox.Backend, m *sandbox.Manager) *Replicas {
	hb, ok := b.(HolderBackend)
	if !ok {
		return nil
	}
	holder := func(ctx context.Context, owner, id string) (netip.AddrPort, error) {
		var addr netip.AddrPort
		err := m.GuardLookup(ctx, owner, id, func(ctx context.Context) error {
			var err error
			addr, err = hb.Holder(ctx, owner, id)
			return err
		})
		return addr, err
	}
	return &Replicas{Key: hb.ForwardKey(), Holds: m.Holds, Holder: holder}
}

// minReplicaKey is the shortest Replicas.Key: the router key's own
// minimum (podinit.MinRouterKey).
const minReplicaKey = 32

// DefaultHolderDial is Replicas.DialTimeout's default.
const DefaultHolderDial = 2 * time.Second

// DefaultHolderProbe is Replicas.ProbeEvery's default.
const DefaultHolderProbe = 10 * time.Second

// holderProbeMisses is how many probes in a row a holder may leave
// unanswered before its forward fails: one lost to a pause (a GC, a
// busy node) is no verdict.
const holderProbeMisses = 2

// errHolderHung is a forward's cancel cause when its holder stopped
// answering probes.
var errHolderHung = errors.New("the holder answers no probe")

// ForwardedHeader marks a request a replica forwarded, with the
// Replicas.Key's proof for its session; a replica serves such a request
// itself, whether it holds the session or not, so no request is
// forwarded twice. A client's, without the proof, is dropped.
const ForwardedHeader = "Warden-Forwarded"

// forwardContext separates the forwarded mark's HMAC from the key's
// other uses.
const forwardContext = "warden forwarded\x00"

// holderLookupWait bounds the lookup of a session's holder.
const holderLookupWait = 10 * time.Second

// forwardMark is the ForwardedHeader value of a request for session id.
func forwardMark(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(forwardContext + id))
	return hex.EncodeToString(m.Sum(nil))
}

// sessionOfPath is the session id a session route's path names
// (/v1/sessions/{id} and below), "" for any other path.
func sessionOfPath(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// Bounds of the forwarder's memory of sessions' holders.
const (
	// holderFor is how long a holder found is used without looking it
	// up again: a session busy with requests at a replica not holding it
	// costs that replica's backend one lookup per holderFor, not one per
	// request. A holder that does not answer the dial is forgotten and
	// looked up again at once (it may have moved).
	holderFor = 5 * time.Second
	// maxHolders bounds the holders remembered.
	maxHolders = 4096
)

// forwarder forwards requests to replicas holding their sessions.
type forwarder struct {
	s     *Server
	cfg   Replicas
	proxy *httputil.ReverseProxy
	// probe asks holders' /healthz (probeHolder).
	probe *http.Client

	mu      sync.Mutex
	holders map[string]heldBy // by owner and session id
	// watches are the holders with forwards under way, each probed by
	// one loop whatever its forwards' number (watchHolder).
	watches   map[netip.AddrPort]*holderWatch
	nextWatch uint64
}

// holderWatch is one holder's probe loop and the forwards it fails when
// the holder stops answering: each forward's cancel, by a number of its
// own. Its fields are under forwarder.mu.
type holderWatch struct {
	cancels map[uint64]context.CancelCauseFunc
	// stop ends the loop, once the last forward ended.
	stop context.CancelFunc
}

// heldBy is a session's holder as looked up at a time.
type heldBy struct {
	addr netip.AddrPort
	at   time.Time
}

// forwardState carries one forward's target and outcome through the
// proxy: dialFailed says the holder did not answer, so nothing was sent;
// hungTold that failed answered (and logged) a hung holder.
type forwardState struct {
	target     netip.AddrPort
	id         string
	dialFailed bool
	hungTold   bool
}

type forwardStateKey struct{}

// dialError is a failed dial of a holder: nothing of the request went.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// newForwarder is the forwarder of cfg for s.
func newForwarder(s *Server, cfg Replicas) *forwarder {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultHolderDial
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = DefaultHolderProbe
	}
	f := &forwarder{s: s, cfg: cfg, holders: map[string]heldBy{}, watches: map[netip.AddrPort]*holderWatch{}}
	d := &net.Dialer{Timeout: cfg.DialTimeout}
	f.probe = &http.Client{
		Transport: &http.Transport{
			DialContext: d.DialContext, MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * cfg.ProbeEvery,
			MaxResponseHeaderBytes: maxProbeHeader,
		},
		// A redirect is an answer: whoever answers at a recorded
		// address must not send the router's GETs elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &dialError{err}
			}
			if err := keepHolder(c); err != nil {
				f.s.log.Debug("bounding a dead holder's connection", "holder", addr, "err", err)
			}
			return c, nil
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:       f.rewrite,
		Transport:     tr,
		FlushInterval: -1, // exec output streams as it comes
		ErrorHandler:  f.failed,
	}
	return f
}

// rewrite points the outgoing request at the holder, marked as
// forwarded; the client's Authorization goes with it, for the holder to
// check as usual.
func (f *forwarder) rewrite(pr *httputil.ProxyRequest) {
	st := pr.In.Context().Value(forwardStateKey{}).(*forwardState)
	pr.Out.URL.Scheme, pr.Out.URL.Host = "http", st.target.String()
	pr.Out.Host = pr.In.Host
	pr.Out.Header.Set(ForwardedHeader, forwardMark(f.cfg.Key, st.id))
}

// failed answers a forward that failed once the holder answered (it
// went away mid-request: 503, retry, and the holder is forgotten, to be
// looked up again), and notes a failed dial, which is answered by taking
// over. A client gone is neither: nothing is answered to it, and its
// holder is not blamed.
func (f *forwarder) failed(w http.ResponseWriter, r *http.Request, err error) {
	st := r.Context().Value(forwardStateKey{}).(*forwardState)
	if errors.Is(context.Cause(r.Context()), errHolderHung) {
		st.hungTold = true
		f.forgetHung(owner(r), st, err)
		f.s.writeError(w, &apiError{http.StatusServiceUnavailable, codeUnavailable,
			"the server holding session " + st.id + " does not answer: retry"})
		return
	}
	if r.Context().Err() != nil {
		f.s.log.Debug("the client left during a forwarded request", "session", st.id, "holder", st.target, "err", err)
		return
	}
	if de := (*dialError)(nil); errors.As(err, &de) {
		st.dialFailed = true
		return
	}
	f.forget(owner(r), st.id)
	f.s.log.Warn("forwarding a request to the replica holding its session", "session", st.id, "holder", st.target, "err", err)
	f.s.writeError(w, &apiError{http.StatusServiceUnavailable, codeUnavailable,
		"the server holding session " + st.id + " stopped answering during the request: retry"})
}

// wrap serves next for requests of sessions held here, forwards the
// others to their live holders, and takes a session over (serves it
// here) when its holder does not answer the dial.
func (f *forwarder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := sessionOfPath(r.URL.Path)
		if id == "" {
			next.ServeHTTP(w, r)
			return
		}
		forwarded := false
		if v := r.Header.Get(ForwardedHeader); v != "" {
			forwarded = hmac.Equal([]byte(v), []byte(forwardMark(f.cfg.Key, id)))
			r.Header.Del(ForwardedHeader)
		}
		o := owner(r)
		held := f.cfg.Holds(o, id)
		if held || forwarded {
			next.ServeHTTP(w, r)
			return
		}
		holder, remembered, err := f.holder(r.Context(), o, id, false)
		if err != nil {
			f.lookupFailed(w, r, id, err)
			return
		}
		if f.forward(w, r, id, holder) {
			return
		}
		if remembered {
			// The holder remembered is gone: the session may have
			// moved since, which one more lookup tells.
			if holder, _, err = f.holder(r.Context(), o, id, true); err != nil {
				f.lookupFailed(w, r, id, err)
				return
			}
			if f.forward(w, r, id, holder) {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// lookupFailed answers a request whose session's holder could not be
// looked up (the store busy or failing): 503 at once, retry, as serving
// it here would cost the store more lookups and a dial of a Pod its
// holder may well have (409 after the handshake). Nothing is answered to
// a client gone.
func (f *forwarder) lookupFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	if r.Context().Err() != nil {
		return
	}
	f.s.writeError(w, &apiError{http.StatusServiceUnavailable, codeUnavailable,
		"looking up the server holding session " + id + ": " + oneLine(err) + "; retry"})
}

// forward sends r to holder, a session's holder wrap found (neither
// held here nor forwarded already); false says it was not sent (no
// holder, or it did not answer the dial, and then it is forgotten) and
// this server is to serve it.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, id string, holder netip.AddrPort) bool {
	if !holder.IsValid() {
		return false
	}
	st := &forwardState{target: holder, id: id}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer f.watchHolder(holder, cancel)()
	// A forward failed once its answer's headers went is not given to
	// failed: the proxy panics with http.ErrAbortHandler, which cuts the
	// client's connection. Its hung holder is forgotten and logged here,
	// on the way out, panic or not.
	defer func() {
		if !st.hungTold && errors.Is(context.Cause(ctx), errHolderHung) {
			f.forgetHung(owner(r), st, context.Cause(ctx))
		}
	}()
	out := r.WithContext(context.WithValue(ctx, forwardStateKey{}, st))
	if r.Body != nil && r.Body != http.NoBody {
		// The proxy closes the body it sends; should the dial fail,
		// nothing of it was read and this server serves it instead.
		out.Body = io.NopCloser(r.Body)
	}
	f.proxy.ServeHTTP(w, out)
	if st.dialFailed {
		f.forget(owner(r), id)
		f.s.log.Info("the replica holding the session does not answer", "session", id, "holder", holder)
		return false
	}
	return true
}

// holder is the session's live holder: remembered from a lookup within
// holderFor (unless fresh), else looked up and remembered; the zero
// AddrPort when there is none, or the session is missing or dead (the
// request is then served here, whose own lookup answers as it finds).
// A lookup failing otherwise (busy, the store's error) is the error.
// remembered says the answer came from memory.
func (f *forwarder) holder(ctx context.Context, o, id string, fresh bool) (addr netip.AddrPort, remembered bool, err error) {
	key := o + "\x00" + id
	f.mu.Lock()
	h, ok := f.holders[key]
	f.mu.Unlock()
	if ok && !fresh && time.Since(h.at) < holderFor {
		return h.addr, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, holderLookupWait)
	defer cancel()
	addr, err = f.cfg.Holder(ctx, o, id)
	if err != nil || !addr.IsValid() {
		f.forget(o, id)
		if err != nil && !errors.Is(err, sandbox.ErrNotFound) && !errors.Is(err, sandbox.ErrDead) {
			return netip.AddrPort{}, false, err
		}
		return netip.AddrPort{}, false, nil
	}
	f.remember(key, addr)
	return addr, false, nil
}

// remember notes addr as the holder under key, dropping the expired
// entries (or, when all are young, all of them) once full.
func (f *forwarder) remember(key string, addr netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.holders) >= maxHolders {
		now := time.Now()
		for k, h := range f.holders {
			if now.Sub(h.at) >= holderFor {
				delete(f.holders, k)
			}
		}
		if len(f.holders) >= maxHolders {
			clear(f.holders)
		}
	}
	f.holders[key] = heldBy{addr, time.Now()}
}

// forget drops owner o's session id's remembered holder.
func (f *forwarder) forget(o, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.holders, o+"\x00"+id)
}

// forgetHung forgets the hung holder of owner o's forward st and logs
// why its forward failed.
func (f *forwarder) forgetHung(o string, st *forwardState, err error) {
	f.forget(o, st.id)
	f.s.log.Warn("the replica holding the session answers no probe: its forward is failed", "session", st.id, "holder", st.target, "err", err)
}

// watchHolder has holder's probe loop (started by the first forward
// to it) fail this forward, by cancel, once the holder stops answering;
// the func it returns ends that, and the loop with its last forward. So
// however many forwards to one holder are under way (long execs), the
// holder gets one /healthz per ProbeEvery from this server.
func (f *forwarder) watchHolder(holder netip.AddrPort, cancel context.CancelCauseFunc) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.watches[holder]
	if w == nil {
		ctx, stop := context.WithCancel(context.Background())
		w = &holderWatch{cancels: map[uint64]context.CancelCauseFunc{}, stop: stop}
		f.watches[holder] = w
		go f.probeHolder(ctx, holder, w)
	}
	f.nextWatch++
	n := f.nextWatch
	w.cancels[n] = cancel
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(w.cancels, n)
		if len(w.cancels) == 0 {
			w.stop()
			if f.watches[holder] == w {
				delete(f.watches, holder)
			}
		}
	}
}

// probeHolder probes holder every ProbeEvery until ctx (its watch's)
// ends, failing every forward of w with errHolderHung once
// holderProbeMisses probes in a row go unanswered: a forward to a hung
// holder ends within about that many periods, whatever the request's
// own length. The next forward to it starts a new watch.
func (f *forwarder) probeHolder(ctx context.Context, holder netip.AddrPort, w *holderWatch) {
	t := time.NewTicker(f.cfg.ProbeEvery)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if f.answers(ctx, holder) {
			misses = 0
			continue
		}
		if misses++; misses < holderProbeMisses {
			continue
		}
		f.mu.Lock()
		for _, cancel := range w.cancels {
			cancel(errHolderHung)
		}
		if f.watches[holder] == w {
			delete(f.watches, holder)
		}
		f.mu.Unlock()
		return
	}
}

// maxProbeHeader bounds a probe's answer's headers, and maxProbeBody the
// body read of it (to keep its connection for the next probe): a
// /healthz answers a few bytes, and whoever answers at a holder's
// address is not trusted to.
const (
	maxProbeHeader = 4 << 10
	maxProbeBody   = 4 << 10
)

// answers is whether holder answers a GET of /healthz (any status: a
// holder too busy to serve says so, which is an answer; a redirect is
// one too, not followed) within half a probe period.
func (f *forwarder) answers(ctx context.Context, holder netip.AddrPort) bool {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.ProbeEvery/2)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+holder.String()+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := f.probe.Do(req)
	if err != nil {
		return false
	}
	// The status is the answer. The body is read (a few bytes, bounded)
	// so that its connection serves the next probe: a failed read
	// changes nothing the probe learned.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	// Nor does a failed close.
	_ = resp.Body.Close()
	return true
}
