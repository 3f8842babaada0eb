package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/warden-sandbox/warden/internal/connlimit"
)

// apiKey is one configured key, kept as its digest: comparing digests of
// equal length in constant time leaks neither the key nor its length.
type apiKey struct {
	digest [sha256.Size]byte
	owner  string
}

// operatorOwner is the owner of every metrics key's requests: no tenant's
// (a tenant is 16 hex digits), and one, so all of them together protect
// at most one tenant's share of connections.
const operatorOwner = "operator"

// ownerOf derives the tenant id of a key: the first 16 hex digits of its
// SHA-256. It is stable across restarts, so a tenant keeps its sessions'
// ownership, and it is safe to log or show because it does not reveal the
// key.
func ownerOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// parseKeys digests the tenants' keys and the operator's metrics keys,
// refusing a key that is in both lists, since it could not say which it is.
func parseKeys(keys, metricsKeys []string) ([]apiKey, error) {
	out := make([]apiKey, 0, len(keys)+len(metricsKeys))
	tenant := map[string]bool{}
	for _, k := range keys {
		if strings.TrimSpace(k) == "" {
			return nil, errors.New("an API key is empty")
		}
		out = append(out, apiKey{digest: sha256.Sum256([]byte(k)), owner: ownerOf(k)})
		tenant[k] = true
	}
	for _, k := range metricsKeys {
		switch {
		case strings.TrimSpace(k) == "":
			return nil, errors.New("a metrics key is empty")
		case tenant[k]:
			return nil, errors.New("a key is both an API key and a metrics key; give the operator a key of its own")
		}
		out = append(out, apiKey{digest: sha256.Sum256([]byte(k)), owner: operatorOwner})
	}
	return out, nil
}

// owners are the tenants keys make, each once.
func owners(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if o := ownerOf(k); !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// Tenants is how many tenants keys make: one per distinct key (a key
// listed twice is one tenant), 0 for none. The server shares its body
// memory among them, and `warden serve` its sessions.
func Tenants(keys []string) int { return len(owners(keys)) }

// ConnectionOwners is how many owners may protect connections from
// eviction (connlimit's Tenants): each API key's tenant, and the operator
// when there are metrics keys, since an operator's request protects its
// connection as a tenant's does. Counting the operator keeps every
// tenant's share of protected connections from overlapping its own.
func ConnectionOwners(keys, metricsKeys []string) int {
	n := Tenants(keys)
	if len(metricsKeys) > 0 {
		n++
	}
	return n
}

// authenticate returns the owner of the request's bearer key. Every
// configured key is compared, whichever matches, so the time taken does
// not tell an attacker how close a guess was.
func (s *Server) authenticate(r *http.Request) (string, bool) {
	if s.cfg.AllowAnonymous {
		return "", true
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return matchKey(s.keys, key)
}

// matchKey is the owner of key (spaces around it ignored) among keys. It
// compares key's digest with every key's, in constant time, whichever
// matches, so the time taken does not tell an attacker how close a guess
// was; every API that takes Warden's keys checks them here.
func matchKey(keys []apiKey, key string) (string, bool) {
	digest := sha256.Sum256([]byte(strings.TrimSpace(key)))
	owner, found := "", false
	for _, k := range keys {
		if subtle.ConstantTimeCompare(digest[:], k.digest[:]) == 1 {
			owner, found = k.owner, true
		}
	}
	return owner, found
}

// metricsPath is the one path a metrics key may read.
const metricsPath = "/metrics"

// publicPaths answer without a key: a liveness probe and the contract
// carry nothing a tenant owns.
var publicPaths = map[string]bool{"/healthz": true, "/openapi.yaml": true}

type ownerKey struct{}

// withAuth rejects a request without a valid key with 401 before anything
// else looks at it, so an unauthenticated caller learns nothing from
// validation errors or timings of the handlers.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		owner, ok := s.authenticate(r)
		if !ok {
			s.writeError(w, &apiError{http.StatusUnauthorized, codeUnauthorized,
				"missing or invalid API key: send Authorization: Bearer <key>"})
			return
		}
		if owner == operatorOwner && r.URL.Path != metricsPath {
			s.writeError(w, &apiError{http.StatusUnauthorized, codeUnauthorized,
				"a metrics key reads " + metricsPath + " only: send an API key for the sessions API"})
			return
		}
		if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok {
			info.owner = owner
		}
		// A tenant's request runs to its end; a stranger's connection
		// stays evictable when the server is full of connections.
		connlimit.Authenticated(r.Context(), owner)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)))
	})
}

// owner is the tenant the authenticated request acts for ("" when the
// server runs without keys).
func owner(r *http.Request) string { return OwnerFrom(r.Context()) }

// OwnerFrom is the tenant the authenticated request acts for, for a
// handler mounted with Config.Mount, which sees only the request: the
// tenant of its API key, or "" when the server runs without keys.
func OwnerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}
