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
	"time"
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
}

// minReplicaKey is the shortest Replicas.Key: the router key's own
// minimum (podinit.MinRouterKey).
const minReplicaKey = 32

// DefaultHolderDial is Replicas.DialTimeout's default.
const DefaultHolderDial = 2 * time.Second

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

// forwardTo is where a request for a session goes: the zero AddrPort
// serves it here. A session held here, or a request already forwarded,
// is served here; else one with another live holder goes to it.
func forwardTo(held, forwarded bool, holder netip.AddrPort) netip.AddrPort {
	if held || forwarded || !holder.IsValid() {
		return netip.AddrPort{}
	}
	return holder
}

// forwarder forwards requests to replicas holding their sessions.
type forwarder struct {
	s     *Server
	cfg   Replicas
	proxy *httputil.ReverseProxy
}

// forwardState carries one forward's target and outcome through the
// proxy: dialFailed says the holder did not answer, so nothing was sent.
type forwardState struct {
	target     netip.AddrPort
	id         string
	dialFailed bool
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
	f := &forwarder{s: s, cfg: cfg}
	d := &net.Dialer{Timeout: cfg.DialTimeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &dialError{err}
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
// went away mid-request: 503, retry), and notes a failed dial, which is
// answered by taking over.
func (f *forwarder) failed(w http.ResponseWriter, r *http.Request, err error) {
	st := r.Context().Value(forwardStateKey{}).(*forwardState)
	if de := (*dialError)(nil); errors.As(err, &de) {
		st.dialFailed = true
		return
	}
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
		var holder netip.AddrPort
		if !held && !forwarded {
			holder = f.holder(r.Context(), o, id)
		}
		target := forwardTo(held, forwarded, holder)
		if !target.IsValid() {
			next.ServeHTTP(w, r)
			return
		}
		st := &forwardState{target: target, id: id}
		out := r.WithContext(context.WithValue(r.Context(), forwardStateKey{}, st))
		if r.Body != nil && r.Body != http.NoBody {
			// The proxy closes the body it sends; should the dial fail,
			// nothing of it was read and this server serves it instead.
			out.Body = io.NopCloser(r.Body)
		}
		f.proxy.ServeHTTP(w, out)
		if st.dialFailed {
			f.s.log.Info("the replica holding the session does not answer: taking it over", "session", id, "holder", target)
			next.ServeHTTP(w, r)
		}
	})
}

// holder is the session's live holder as recorded, the zero AddrPort
// when there is none or the lookup fails (the request is then served
// here, whose own lookup answers as it finds).
func (f *forwarder) holder(ctx context.Context, o, id string) netip.AddrPort {
	ctx, cancel := context.WithTimeout(ctx, holderLookupWait)
	defer cancel()
	addr, err := f.cfg.Holder(ctx, o, id)
	if err != nil {
		return netip.AddrPort{}
	}
	return addr
}
