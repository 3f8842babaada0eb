package mcp

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Each MCP session over HTTP holds memory in the SDK (goroutines, state)
// until it has been idle for httpSessionIdle; a client sending initialize
// in a loop could otherwise grow the server without end. sessionCap counts
// the sessions it sees opened, per tenant and in all, and refuses another
// initialize past either cap until older ones end or go idle.
const (
	maxHTTPSessionsPerOwner = 32
	maxHTTPSessions         = 1024
)

// sessionHeader is the header Streamable HTTP carries a session's id in.
const sessionHeader = "Mcp-Session-Id"

type sessionCap struct {
	owner func(context.Context) string

	mu       sync.Mutex
	sessions map[string]capEntry
}

type capEntry struct {
	owner    string
	lastUsed time.Time
}

func newSessionCap(owner func(context.Context) string) *sessionCap {
	return &sessionCap{owner: owner, sessions: map[string]capEntry{}}
}

// wrap admits a request: one that opens a session (no session id yet)
// only under the caps; one for a known session refreshes it, and a DELETE
// forgets it.
func (c *sessionCap) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := c.owner(r.Context())
		id := r.Header.Get(sessionHeader)
		if id != "" {
			c.touch(id, r.Method == http.MethodDelete)
			next.ServeHTTP(w, r)
			return
		}
		if !c.admit(owner) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			// The client is gone if this fails.
			_, _ = w.Write([]byte(`{"error":{"code":"too_many_sessions","message":"too many open MCP sessions: end one (DELETE with its Mcp-Session-Id) or let it go idle"}}` + "\n"))
			return
		}
		next.ServeHTTP(&recordSession{ResponseWriter: w, c: c, owner: owner}, r)
	})
}

// admit prunes idle sessions and says whether owner may open another.
func (c *sessionCap) admit(owner string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	mine := 0
	for id, e := range c.sessions {
		if time.Since(e.lastUsed) > httpSessionIdle {
			delete(c.sessions, id)
			continue
		}
		if e.owner == owner {
			mine++
		}
	}
	return mine < maxHTTPSessionsPerOwner && len(c.sessions) < maxHTTPSessions
}

func (c *sessionCap) touch(id string, end bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.sessions[id]
	switch {
	case !ok:
	case end:
		delete(c.sessions, id)
	default:
		e.lastUsed = time.Now()
		c.sessions[id] = e
	}
}

func (c *sessionCap) add(id, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessions[id] = capEntry{owner: owner, lastUsed: time.Now()}
}

// recordSession notes the session id the SDK assigns in its answer.
type recordSession struct {
	http.ResponseWriter
	c     *sessionCap
	owner string
	done  bool
}

func (r *recordSession) WriteHeader(code int) {
	r.note()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recordSession) Write(b []byte) (int, error) {
	r.note()
	return r.ResponseWriter.Write(b)
}

func (r *recordSession) note() {
	if r.done {
		return
	}
	r.done = true
	if id := r.Header().Get(sessionHeader); id != "" {
		r.c.add(id, r.owner)
	}
}

// Flush passes streaming flushes on to the real writer.
func (r *recordSession) Flush() {
	r.note()
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *recordSession) Unwrap() http.ResponseWriter { return r.ResponseWriter }
