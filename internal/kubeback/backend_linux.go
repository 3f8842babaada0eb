package kubeback

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/poddial"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Backend is the kubernetes backend: sessions only (a sandbox.RemoteBackend),
// each a SandboxClaim whose Pod's agent is its box.
type Backend struct {
	name      string
	cfg       Config
	claims    *podclaim.Claimer
	routerKey []byte
	// self is Config.Advertise, the zero AddrPort when not given.
	self netip.AddrPort
	log  *slog.Logger
	// stopWatch ends the Pod watch (WatchPods) the sessions' deaths
	// are told by.
	stopWatch context.CancelFunc
}

// The Manager holds the backend's sessions as remote ones.
var (
	_ sandbox.RemoteBackend = (*Backend)(nil)
	_ sandbox.RemoteFiler   = (*box)(nil)
)

// New is the backend called name, reaching the cluster as cfg says and
// reading the router key, which it refuses to start without, as it does
// a malformed Config.Advertise.
func New(name string, cfg Config) (*Backend, error) {
	if _, err := ParseAdvertise(cfg.Advertise); err != nil {
		return nil, err
	}
	key, err := cfg.RouterKey()
	if err != nil {
		return nil, err
	}
	rc, err := cfg.RestConfig()
	if err != nil {
		return nil, err
	}
	return NewWith(name, rc, key, cfg)
}

// NewWith is New with the API server's config and the router key given
// (tests, and callers that hold them already).
func NewWith(name string, rc *rest.Config, routerKey []byte, cfg Config) (*Backend, error) {
	if len(routerKey) < podinit.MinRouterKey {
		return nil, fmt.Errorf("the router key has %d bytes: it needs at least %d random ones", len(routerKey), podinit.MinRouterKey)
	}
	if cfg.QPS < 0 || cfg.Burst < 0 {
		return nil, fmt.Errorf("backend %s: --kube-qps %v and --kube-burst %d must not be negative: give positive ones, or 0 for the defaults (%d, %d)", name, cfg.QPS, cfg.Burst, DefaultQPS, DefaultBurst)
	}
	self, err := ParseAdvertise(cfg.Advertise)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	pc := podclaim.Config{Namespace: cfg.Namespace, RouterKey: routerKey, ActivityInterval: cfg.ActivityInterval, ReadyTimeout: cfg.ReadyTimeout, Logger: cfg.Logger}
	if self.IsValid() {
		pc.Holder = func(uid types.UID) string { return holderValue(routerKey, uid, self.String()) }
	}
	c, err := podclaim.New(rc, pc)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Backend{name: name, cfg: cfg, claims: c, routerKey: routerKey, self: self, log: cfg.Logger, stopWatch: cancel}
	go b.watchPods(ctx)
	return b, nil
}

// watchPods runs the Pod watch until ctx ends: a session's Pod that dies
// ends its session at once, with the cluster's reason. A session is
// registered with it at once, before its first list ends (OnDeath reads
// its Pod once, and the first list's events tell a death); while the
// watch cannot list (no rights, the API server unreachable, which
// WatchPods warns of), a death is learned from the session's stream and
// Find instead.
func (b *Backend) watchPods(ctx context.Context) {
	if err := b.claims.WatchPods(ctx); err != nil && ctx.Err() == nil {
		b.log.Warn("watching sandbox Pods: a session's death is learned when its stream ends", "err", err)
	}
}

// Close ends the backend's Pod watch; its sessions' claims stay. warden
// serve never calls it (the watch lasts as long as the process); tests
// and programs that make backends of their own do.
func (b *Backend) Close() error {
	b.stopWatch()
	return nil
}

// Name is the backend's name in the registry.
func (b *Backend) Name() string { return b.name }

// Start is refused: a Pod's session must be named before it is claimed,
// which only the Manager's Claim does.
func (b *Backend) Start(context.Context, spec.Spec) (sandbox.Box, error) {
	return nil, fmt.Errorf("%w: backend %s starts sessions only through the server's Manager, which names them", sandbox.ErrUnsupported, b.name)
}

// Run is refused: a one-shot run would claim and release a warm Pod for
// one command; create a session and exec in it instead.
func (b *Backend) Run(context.Context, spec.Spec, io.Reader, sandbox.Stream) (spec.Result, error) {
	return spec.Result{}, fmt.Errorf("%w: backend %s runs no one-shot sandboxes: create a session and exec in it", sandbox.ErrUnsupported, b.name)
}

// Claim claims a warm Pod for session r from r.Template's warm pool and
// attaches its agent within the ready timeout; a Pod that cannot be
// attached is released at once.
func (b *Backend) Claim(ctx context.Context, r sandbox.RemoteSession, s spec.Spec) (sandbox.Box, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("%w: backend %s records each session's owner on its claim: start warden serve with API keys", spec.ErrInvalid, b.name)
	}
	if err := poddial.Refuse(s); err != nil {
		return nil, err
	}
	if err := b.cfg.checkTemplate(r.Template); err != nil {
		return nil, err
	}
	tmpl := r.Template
	if tmpl == "" {
		tmpl = b.cfg.Template
	}
	if err := b.checkOwnerCount(ctx, r); err != nil {
		return nil, err
	}
	ps, err := b.claims.Claim(ctx, podclaim.Request{Session: r.ID, Owner: OwnerLabel(b.routerKey, r.Owner), Template: tmpl, TTL: r.TTL, IdleTimeout: r.Idle, Limits: s.Limits, Network: s.Network})
	if err != nil {
		return nil, err
	}
	// A Pod that shakes hands and never says ready must not hold the
	// create and the claim until the client leaves.
	actx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	box, _, err := b.attach(actx, ps, s)
	if err != nil {
		b.release(ps)
		return nil, err
	}
	return box, nil
}

// checkOwnerCount refuses r when its owner holds r.MaxPerOwner claims
// already, counted across every replica (one label-selected LIST): a
// replica's Manager counts only the sessions it holds, so behind a
// Service a tenant could hold replicas times its limit. Replicas
// creating at once may each pass the count: a namespace ResourceQuota is
// the hard cap (docs/kubernetes.md).
func (b *Backend) checkOwnerCount(ctx context.Context, r sandbox.RemoteSession) error {
	if r.MaxPerOwner <= 0 {
		return nil
	}
	held, err := b.claims.List(ctx, OwnerLabel(b.routerKey, r.Owner))
	if err != nil {
		return fmt.Errorf("counting this key's sessions: %w", err)
	}
	return ownerCount(len(held), r.MaxPerOwner)
}

// ownerCount is ErrTooMany when an owner holding n sessions across the
// cluster may not make another under its limit max.
func ownerCount(n, max int) error {
	if n >= max {
		return fmt.Errorf("%w: this key holds %d sessions across the cluster's servers, its limit is %d (set by --max-sessions-per-key); delete a session or retry later", sandbox.ErrTooMany, n, max)
	}
	return nil
}

// release releases ps after a failed attach, logging a failure (the
// claim's TTL and the reaper are the backstop).
func (b *Backend) release(ps *podclaim.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), sandbox.ReleaseWait)
	defer cancel()
	if err := b.claims.Release(ctx, ps); err != nil && !errors.Is(err, podclaim.ErrNotFound) {
		b.log.Warn("releasing a claim whose Pod could not be attached", "session", ps.ID, "claim", ps.Claim, "err", err)
	}
}

// Find attaches to owner's session id, which another replica claimed:
// its Pod's files are kept, its processes are not (the Pod's init ends
// them with the connection that started them), which Note says.
func (b *Backend) Find(ctx context.Context, owner, id string, ceil spec.Ceilings) (sandbox.Box, sandbox.RemoteSession, error) {
	ps, err := b.claims.Find(ctx, OwnerLabel(b.routerKey, owner), id)
	switch {
	case errors.Is(err, podclaim.ErrNotFound):
		return nil, sandbox.RemoteSession{}, fmt.Errorf("%w: no session %q", sandbox.ErrNotFound, id)
	case errors.Is(err, podclaim.ErrDead):
		return nil, sandbox.RemoteSession{}, fmt.Errorf("%w: %w", sandbox.ErrDead, err)
	case err != nil:
		return nil, sandbox.RemoteSession{}, err
	}
	lim, clamped := ceil.Clamp(ps.Limits)
	// The recorded policy, not none: the session's egress is attached
	// again, on this replica's proxy, with the rules last in force.
	s := spec.Spec{Limits: lim, Network: ps.Network}
	box, adoption, err := b.attach(ctx, ps, s)
	if err != nil {
		return nil, sandbox.RemoteSession{}, unanswered(err)
	}
	b.hold(ctx, ps)
	r := sandbox.RemoteSession{
		ID: ps.ID, Owner: owner, Template: ps.Template, Idle: ps.IdleTimeout,
		Created: ps.Created, Expires: ps.Expires, LastActive: ps.LastActive, Limits: lim, Network: ps.Network,
		Note: "attached to the session's Pod " + ps.Pod + ": its files are kept, its earlier processes and interpreters ended with the last server's connection",
	}
	if ps.Network.Mode == spec.NetProxy {
		r.Note += "; its egress is this server's proxy with the recorded rules, its audit events and the bytes counted against its budget so far were the last server's"
	}
	if adoption == podinit.Adopted {
		r.Note = "attached to the session's Pod " + ps.Pod + ", whose init had restarted: only its volumes' files are kept"
	}
	r.Note += lowered(clamped)
	return box, r, nil
}

// lowered says, for a Note, which of a claim's recorded limits this
// replica's ceilings lowered: the claim is store data other components
// can write, which an operator wants to hear of.
func lowered(clamped []*spec.CeilingError) string {
	var b strings.Builder
	for _, e := range clamped {
		asked := e.Value
		if e.Unlimited {
			asked = "none"
		}
		fmt.Fprintf(&b, "; its recorded %s limit %s is lowered to %s, the ceiling set by --%s", e.Field.Name, asked, e.Ceiling, e.Field.Flag)
	}
	return b.String()
}

// List is owner's sessions as their claims record them, whichever
// replica holds them: one label-selected LIST of the owner's claims
// (podclaim.List, in pages), no Pod read. A claim being deleted is left
// out (the session was deleted, reaped or expired). A claim's state is
// what it says: creating until its claiming replica records its Pod,
// dead if that never happened within the ready timeout (the replica
// died first), else ready; a Pod that died since is told by Find, at
// the session's next use.
func (b *Backend) List(ctx context.Context, owner string) ([]sandbox.RemoteSession, error) {
	held, err := b.claims.List(ctx, OwnerLabel(b.routerKey, owner))
	if err != nil {
		return nil, err
	}
	return b.listed(owner, held), nil
}

// listed is owner's sessions held, as List tells them.
func (b *Backend) listed(owner string, held []*podclaim.Session) []sandbox.RemoteSession {
	out := make([]sandbox.RemoteSession, 0, len(held))
	for _, ps := range held {
		if !ps.Releasing {
			out = append(out, b.recorded(owner, ps))
		}
	}
	return out
}

// recorded is session ps of owner with the state its claim tells.
func (b *Backend) recorded(owner string, ps *podclaim.Session) sandbox.RemoteSession {
	r := sandbox.RemoteSession{
		ID: ps.ID, Owner: owner, Template: ps.Template, Idle: ps.IdleTimeout, Limits: ps.Limits,
		Created: ps.Created, Expires: ps.Expires, LastActive: ps.LastActive, State: sandbox.StateReady,
	}
	err := b.claims.Unrecorded(ps)
	switch {
	case errors.Is(err, podclaim.ErrDead):
		prefix := fmt.Sprintf("session %q: %v: ", ps.ID, podclaim.ErrDead)
		r.State, r.Reason = sandbox.StateDead, podDeath{err: err, prefix: prefix}.Cause()
	case err != nil:
		r.State = sandbox.StateCreating
	}
	return r
}

// Reap releases the sessions past their TTL or idle timeout, or whose
// Pod died, whichever replica claimed them.
func (b *Backend) Reap(ctx context.Context) error {
	rep, err := b.claims.Reap(ctx)
	if err != nil {
		return err
	}
	for _, r := range rep.Released {
		b.log.Info("released a session's claim", "session", r.Session, "reason", r.Reason)
	}
	return nil
}

// attach dials ps's Pod, proves the Pod's key and attaches a session of s.
func (b *Backend) attach(ctx context.Context, ps *podclaim.Session, s spec.Spec) (*box, podinit.Adoption, error) {
	key, err := podinit.Key(b.routerKey, string(ps.PodUID))
	if err != nil {
		return nil, 0, err
	}
	conn, adoption, err := poddial.Dial(ctx, netip.AddrPortFrom(ps.PodIP, podinit.Port).String(), key)
	if err != nil {
		return nil, 0, fmt.Errorf("session %q's Pod %s: %w", ps.ID, ps.Pod, err)
	}
	sess, err := poddial.Attach(ctx, conn, s, b.log.With("session", ps.ID))
	if err != nil {
		return nil, 0, fmt.Errorf("session %q's Pod %s: %w", ps.ID, ps.Pod, err)
	}
	return newBox(ctx, sandbox.AgentBox(sess), sess, b, ps), adoption, nil
}

// unanswered is err, from attaching a found session's Pod, as ErrBusy
// when the Pod did not answer in time: its init serves one connection at
// a time, so another replica most likely holds the session (see
// docs/kubernetes.md, Replicas), and a retry may find it free.
func unanswered(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: its Pod answered no new connection in time (it serves one at a time: another replica may hold the session); retry shortly: %w", sandbox.ErrBusy, err)
	}
	return err
}

// hold records this replica as the holder of ps, just attached, so that
// the other replicas forward its requests here rather than dial its Pod
// (which answers none while this replica holds it). A failure is logged:
// the session is served all the same, and a replica forwarding to the
// earlier holder takes the session over only if that one does not answer.
func (b *Backend) hold(ctx context.Context, ps *podclaim.Session) {
	if err := b.claims.Hold(ctx, ps); err != nil {
		b.log.Warn("recording this replica as the session's holder on its claim", "session", ps.ID, "err", err)
	}
}

// Holder is the address of the live replica that holds owner's session
// id as its claim records it (one GET), for a request this replica does
// not hold: the zero AddrPort when none is recorded, it is this
// replica's own, or its proof does not check (logged: someone who may
// edit claims wrote it). A session that is none of owner's is
// sandbox.ErrNotFound.
func (b *Backend) Holder(ctx context.Context, owner, id string) (netip.AddrPort, error) {
	ps, err := b.claims.Read(ctx, OwnerLabel(b.routerKey, owner), id)
	switch {
	case errors.Is(err, podclaim.ErrNotFound):
		return netip.AddrPort{}, fmt.Errorf("%w: no session %q", sandbox.ErrNotFound, id)
	case err != nil:
		return netip.AddrPort{}, err
	case ps.Holder == "":
		return netip.AddrPort{}, nil
	}
	addr, err := holderAddr(b.routerKey, ps.ClaimUID(), ps.Holder)
	if err != nil {
		b.log.Warn("ignoring the holder recorded on a session's claim", "session", id, "claim", ps.Claim, "err", err)
		return netip.AddrPort{}, nil
	}
	if addr == b.self {
		return netip.AddrPort{}, nil
	}
	return addr, nil
}

// ForwardKey is the key replicas prove a forwarded request with
// (server.Replicas.Key): derived from the router key, which every
// replica has and no client does, and apart from its other uses.
func (b *Backend) ForwardKey() []byte {
	m := hmac.New(sha256.New, b.routerKey)
	m.Write([]byte(forwardKeyContext))
	return m.Sum(nil)
}
