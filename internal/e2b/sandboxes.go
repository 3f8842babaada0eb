package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// Sandbox is one E2B sandbox: a Warden session plus what E2B's API says
// about it. A stored Sandbox is never changed: an update stores a new
// copy, so a handler may read the one it was given without a lock.
type Sandbox struct {
	// ID is E2B's sandboxID; equal to the Warden session id.
	ID string
	// Owner is the tenant of the API key that created it.
	Owner string
	// Template is the templateID as E2B names it ("base", ...).
	Template string
	// EnvdToken is the envdAccessToken: random, 32 bytes, hex; required
	// on every data-plane call.
	EnvdToken string
	// TrafficToken is the trafficAccessToken, random as EnvdToken; the
	// code interpreter's calls carry it beside EnvdToken.
	TrafficToken string
	// StartedAt is when the sandbox was created; EndAt when it expires
	// (the session's expiry, moved by setTimeout).
	StartedAt, EndAt time.Time
	// Metadata is the caller's metadata given at create.
	Metadata map[string]string
	// Env is the envVars given at create.
	Env map[string]string
}

type sandboxKey struct{}

// withSandbox gives ctx the sandbox a data-plane request was routed to.
func withSandbox(ctx context.Context, sb *Sandbox) context.Context {
	return context.WithValue(ctx, sandboxKey{}, sb)
}

// sandboxFrom is the sandbox a data-plane request was routed to; set by
// the router after it has checked the sandbox id and the access token, so
// handlers never see an unchecked request. It is nil only outside the
// router (a bug), which handlers answer as an internal error.
func sandboxFrom(ctx context.Context) *Sandbox {
	sb, _ := ctx.Value(sandboxKey{}).(*Sandbox)
	return sb
}

// newToken is a fresh access token: 32 random bytes, hex.
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// registry holds the E2B side of live sandboxes, by id. It holds at most
// max entries; an entry whose session is gone is dropped when it is
// looked up, and all such entries when the registry is full.
type registry struct {
	mu   sync.Mutex
	byID map[string]*Sandbox
	max  int
}

func newRegistry(max int) *registry {
	return &registry{byID: map[string]*Sandbox{}, max: max}
}

// get is the sandbox with id, or nil.
func (g *registry) get(id string) *Sandbox {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byID[id]
}
