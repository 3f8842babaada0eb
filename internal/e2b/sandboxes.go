package e2b

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
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
	// Metadata is the caller's metadata given at create, which getInfo
	// and list answer.
	Metadata map[string]string
	// Env is the envVars given at create, which the code interpreter
	// restores after an execution's own env_vars. Metadata and Env are
	// kept only while the sandbox is registered: an ended sandbox keeps
	// neither (see endedSandbox), so user secrets do not outlive it.
	Env map[string]string
	// pids counts the process handles handed out in the sandbox (see
	// procTable); a copy shares it, so it lasts the sandbox's whole life.
	pids *atomic.Uint32
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

// errFull says the registry has no room: as many sandboxes as
// Config.MaxSandboxes are live.
var errFull = errors.New("too many E2B sandboxes on this server: kill some before creating more")

// registry holds the E2B side of live sandboxes, by id. It holds at most
// max entries, and forgets one whose session is gone (killed, expired or
// reaped) when it next looks it up, lists its owner's, or sweeps: add
// sweeps whenever the registry has doubled since its last sweep (and
// before it refuses for want of room), so entries of gone sessions never
// outnumber live ones by more than minSweep, however few calls look.
type registry struct {
	sessions sandbox.Sessions
	max      int
	// now is the clock expiries are read against; time.Now but in tests.
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*Sandbox
	// sweepAt is the size at which add next sweeps.
	sweepAt int
	// ended remembers the last maxEnded sandboxes forgotten, so that a
	// data-plane call with an ended sandbox's own token is told it has
	// ended (as E2B tells it) rather than refused; endedOrder is their
	// ids, oldest first. Only the id, owner and token digests are kept.
	ended      map[string]endedSandbox
	endedOrder []string
}

// endedSandbox is what the registry keeps of a forgotten sandbox: enough
// to recognise its own token, nothing of what the caller gave at create.
type endedSandbox struct {
	id, owner string
	tokens    tokenDigests
}

// tokenDigests are the SHA-256 digests of a sandbox's envdAccessToken and
// trafficAccessToken, which the router compares in constant time.
type tokenDigests struct {
	envd, traffic [sha256.Size]byte
}

// digestsOf is sb's tokenDigests.
func digestsOf(sb *Sandbox) tokenDigests {
	return tokenDigests{envd: sha256.Sum256([]byte(sb.EnvdToken)), traffic: sha256.Sum256([]byte(sb.TrafficToken))}
}

// maxEnded bounds registry.ended: about 200 bytes each.
const maxEnded = 4096

// minSweep is the fewest entries at which add sweeps the registry.
const minSweep = 64

func newRegistry(sessions sandbox.Sessions, max int) *registry {
	return &registry{sessions: sessions, max: max, byID: map[string]*Sandbox{}, ended: map[string]endedSandbox{}, sweepAt: minSweep, now: time.Now}
}

// add stores a new sandbox; when the registry is full, or has doubled
// since it last swept, it first forgets the sandboxes whose sessions are
// gone, and answers errFull if that is not enough room.
func (g *registry) add(sb *Sandbox) error {
	if n := g.len(); n >= g.max || n >= g.swept() {
		g.sweep()
		g.mu.Lock()
		g.sweepAt = max(minSweep, 2*len(g.byID))
		g.mu.Unlock()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.byID) >= g.max {
		return errFull
	}
	g.byID[sb.ID] = sb
	return nil
}

// swept is the size at which add next sweeps.
func (g *registry) swept() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sweepAt
}

// len is how many sandboxes the registry holds.
func (g *registry) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byID)
}

// live says whether sb's session still exists and has not passed its
// expiry (it may be dead: its box gone, its files kept), and forgets sb
// if not.
func (g *registry) live(sb *Sandbox) bool {
	info, err := g.sessions.Get(context.Background(), sb.Owner, sb.ID) // a check or sweep of no request's context (docs/kubernetes.md)
	if errors.Is(err, sandbox.ErrNotFound) || (err == nil && g.expired(info)) {
		g.forget(sb)
		return false
	}
	return true
}

// expired says whether a session is past its expiry. The reaper ends it
// only on its next pass, so without this a sandbox whose timeout was
// shortened to now would keep answering for up to a reaper interval,
// where E2B's ends at its timeout.
func (g *registry) expired(info sandbox.Info) bool {
	return !info.ExpiresAt.IsZero() && !info.ExpiresAt.After(g.now())
}

// lookup is owner's sandbox id and its session's state. Another owner's
// sandbox, an unknown one and a gone one all answer sandbox.ErrNotFound,
// so ids cannot be probed across tenants. ctx (the request's) bounds
// the session's lookup (an attach, on a backend several servers share).
func (g *registry) lookup(ctx context.Context, owner, id string) (*Sandbox, sandbox.Info, error) {
	g.mu.Lock()
	sb := g.byID[id]
	g.mu.Unlock()
	if sb == nil || sb.Owner != owner {
		return nil, sandbox.Info{}, notFound(id)
	}
	info, err := g.sessions.Get(ctx, owner, id)
	if errors.Is(err, sandbox.ErrNotFound) || (err == nil && g.expired(info)) {
		g.forget(sb)
		return nil, sandbox.Info{}, notFound(id)
	}
	if err != nil {
		return nil, sandbox.Info{}, err
	}
	return sb, info, nil
}

// notFound is the one answer for a sandbox id the caller cannot use:
// unknown, gone, or another key's.
func notFound(id string) error {
	return fmt.Errorf("%w: sandbox %q not found: it was killed or timed out, or belongs to another API key", sandbox.ErrNotFound, id)
}

// listed pairs a sandbox with its session's state.
type listed struct {
	sb   *Sandbox
	info sandbox.Info
}

// owned is owner's live sandboxes, oldest first, and forgets those of its
// sandboxes whose sessions are gone or past their expiry. Sessions made through Warden's own
// API are not E2B sandboxes and are left out.
func (g *registry) owned(owner string) []listed {
	infos := g.sessions.List(owner)
	live := make(map[string]bool, len(infos))
	var out []listed
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, info := range infos {
		if g.expired(info) {
			continue
		}
		live[info.ID] = true
		if sb := g.byID[info.ID]; sb != nil && sb.Owner == owner {
			out = append(out, listed{sb, info})
		}
	}
	for id, sb := range g.byID {
		if sb.Owner == owner && !live[id] {
			g.forgetLocked(sb)
		}
	}
	return out
}

// replace stores sb in place of the sandbox with its id, if it is still
// there; stored sandboxes are never changed in place.
func (g *registry) replace(sb *Sandbox) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byID[sb.ID]; ok {
		g.byID[sb.ID] = sb
	}
}

// forget drops sb, whose session is gone, into the ended sandboxes.
func (g *registry) forget(sb *Sandbox) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forgetLocked(sb)
}

// forgetLocked is forget with g.mu held; the oldest ended sandbox makes
// room for the newest.
func (g *registry) forgetLocked(sb *Sandbox) {
	cur, ok := g.byID[sb.ID]
	if !ok {
		return
	}
	delete(g.byID, sb.ID)
	if len(g.endedOrder) >= maxEnded {
		delete(g.ended, g.endedOrder[0])
		g.endedOrder = g.endedOrder[1:]
	}
	g.ended[cur.ID] = endedSandbox{id: cur.ID, owner: cur.Owner, tokens: digestsOf(cur)}
	g.endedOrder = append(g.endedOrder, cur.ID)
}

// sweep forgets every sandbox whose session is gone. The sessions are
// asked without the registry's lock held.
func (g *registry) sweep() {
	g.mu.Lock()
	all := make([]*Sandbox, 0, len(g.byID))
	for _, sb := range g.byID {
		all = append(all, sb)
	}
	g.mu.Unlock()
	for _, sb := range all {
		g.live(sb)
	}
}

// peek is the stored sandbox with id, or nil, without asking the
// sessions.
func (g *registry) peek(id string) *Sandbox {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byID[id]
}

// peekAny is peek, or else a stand-in for the ended sandbox with id
// (only its ID and Owner set); ended says which, and tokens are its token
// digests either way.
func (g *registry) peekAny(id string) (sb *Sandbox, tokens tokenDigests, ended bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sb := g.byID[id]; sb != nil {
		return sb, digestsOf(sb), false
	}
	e, ok := g.ended[id]
	if !ok {
		return nil, tokenDigests{}, false
	}
	return &Sandbox{ID: e.id, Owner: e.owner}, e.tokens, true
}
