// Package podclaim claims sandbox Pods from agent-sandbox warm pools for
// Warden sessions on Kubernetes (issue 23): a session is a SandboxClaim,
// and everything a router replica needs to serve or reap it later lives
// on that claim (labels and annotations), so any replica serves any
// session and a replica's crash loses nothing. There is no local
// registry, lease or scheduler: the API server is the only state.
package podclaim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Keys of the labels and annotations Warden puts on its claims, under a
// domain of the project's own (its GitHub organisation's pages), so
// that no other tool's keys collide with them.
const (
	keyPrefix = "warden-sandbox.github.io/"
	// ManagedLabel marks a claim as a Warden session, for List and Reap.
	ManagedLabel = keyPrefix + "managed"
	// SessionLabel holds ClaimName of the session's id, a label-safe
	// form (Warden's ids may end in '-' or '_', which a label value may
	// not), so a claim Warden made is told by its labels alone.
	SessionLabel = keyPrefix + "session"
	// SessionAnnotation holds the session's id itself; the claim's name
	// is derived from it (ClaimName), and Find and sessionOf compare the
	// two, which guards against a collision.
	SessionAnnotation = keyPrefix + "session"
	// OwnerLabel holds the tenant that made the session, so that a list
	// of one tenant's sessions is a label selector, not a scan.
	OwnerLabel = keyPrefix + "owner"
	// TemplateLabel holds the Warden template (the SandboxTemplate).
	TemplateLabel = keyPrefix + "template"
	// IdleAnnotation is the idle timeout, a Go duration ("15m").
	IdleAnnotation = keyPrefix + "idle-timeout"
	// ActiveAnnotation is the last recorded activity, RFC 3339 with
	// nanoseconds, written at most once per Config.ActivityInterval.
	ActiveAnnotation = keyPrefix + "last-active"
	// LimitsAnnotation is the session's limits as JSON (spec.Limits).
	LimitsAnnotation = keyPrefix + "limits"
	// PodAnnotation is "name/uid" of the Pod the claim got when it was
	// first Ready: a later Pod under the same name (the controller
	// replaces a deleted one) is not the session's.
	PodAnnotation = keyPrefix + "pod"
	// ReadyAnnotation is when the claim was first seen Ready (RFC 3339).
	ReadyAnnotation = keyPrefix + "ready"
	// NetworkAnnotation is the session's network policy as JSON
	// ({"mode":"proxy","allow":[...],"deny":[...]}) sealed with the
	// router key ("v1.<seal>.<JSON>", sealNetwork), written with the
	// Pod's record and kept current by SetNetwork, so that a replica
	// re-attaching the session attaches its egress with the rules in
	// force. Whoever may patch claims may write it, so its reader checks
	// the seal.
	NetworkAnnotation = keyPrefix + "network"
	// HolderAnnotation is the address of the router replica holding the
	// session's Pod connection, with its proof (Config.Holder's value,
	// written with the Pod's record and again by Hold): other replicas
	// forward the session's requests there. Whoever may patch claims may
	// write it, so its reader checks the proof.
	HolderAnnotation = keyPrefix + "holder"
)

// managedValue is ManagedLabel's value.
const managedValue = "true"

// Errors a caller tells apart with errors.Is.
var (
	// ErrNotFound: no claim holds the session (released, reaped,
	// expired, or never made).
	ErrNotFound = errors.New("no such session")
	// ErrDead: the claim exists but its Pod is gone, replaced or ended,
	// and the session's state with it.
	ErrDead = errors.New("session is dead")
	// ErrPending: the claim exists but its claiming replica has not yet
	// recorded its Pod; a retry shortly may find it.
	ErrPending = errors.New("session is still being claimed")
	// ErrUnwatched: OnDeath's watch ended (WatchPods' context did)
	// before the session's Pod died, so its death would go unheard; Find
	// says whether the session lives.
	ErrUnwatched = errors.New("the Pod watch ended: call Find to learn whether the session lives")
)

// Request is what a new session needs from a claim.
type Request struct {
	// Session is Warden's id of the session: at most maxIDLen of
	// [A-Za-z0-9._-] (sandbox.Manager's "ses_" and base64url fit).
	Session string
	// Owner is the tenant the session belongs to, a label value too.
	Owner string
	// Template names the SandboxTemplate; its SandboxWarmPool must have
	// the same name (deploy/ installs "default" for both).
	Template string
	// TTL is the session's whole life: the claim's shutdownTime, which
	// agent-sandbox's controller enforces even with no router running.
	TTL time.Duration
	// IdleTimeout releases a session with no activity for that long.
	IdleTimeout time.Duration
	// Limits are the session's limits, for whichever replica serves it.
	Limits spec.Limits
	// Network is the session's network policy (its mode and rules), for
	// whichever replica serves it: its egress is the serving replica's
	// proxy.
	Network spec.NetworkPolicy
}

// Session is a claimed sandbox Pod, as any replica sees it.
type Session struct {
	// ID, Owner and Template are the Request's, read back from the
	// claim (the id from its annotation, the rest from labels).
	ID, Owner, Template string
	// Claim is the SandboxClaim's name, Sandbox the Sandbox it bound.
	Claim, Sandbox string
	// Pod and PodUID name the Pod the session runs in; PodIP reaches it.
	Pod    string
	PodUID types.UID
	PodIP  netip.Addr
	// Created is the claim's creation, Ready when it was first Ready.
	Created, Ready time.Time
	// Expires is the claim's shutdownTime (zero: no TTL).
	Expires time.Time
	// Releasing says the claim is being deleted (a Release, a reap or
	// its TTL): the session has ended, though the claim is still read.
	Releasing bool
	// IdleTimeout and LastActive decide the idle reap.
	IdleTimeout time.Duration
	LastActive  time.Time
	// Holder is HolderAnnotation's value as read ("" when absent):
	// unchecked input, for the reader to verify with ClaimUID.
	Holder string
	// Limits are the Request's, for the replica that serves an exec.
	// They are valid (spec.Limits.Validate), but the claim is a store
	// other components can write: the serving replica must still clamp
	// them with its own spec.Ceilings.
	Limits spec.Limits
	// Network is the recorded network policy (NetworkAnnotation), set
	// by Find and Claim once its seal checked: valid and parsed as the
	// egress proxy parses it. A listing and Read (the holder's lookup)
	// leave it zero.
	Network spec.NetworkPolicy

	// networkRecord is NetworkAnnotation's value as read: unchecked
	// input until Claimer.network opens it.
	networkRecord string

	// claimUID is the claim's UID, which Release and Touch require, so
	// they never act on another claim of the same name.
	claimUID types.UID
}

// ClaimUID is the UID of the session's claim, which a holder's proof
// (HolderAnnotation) is bound to, so that a proof copied from another
// claim does not check.
func (s *Session) ClaimUID() types.UID { return s.claimUID }

// ClaimName is the name of the claim of session id: derived from the id
// so that a session's claim is one GET away from any replica and a
// second claim for the same id fails as AlreadyExists. It is a hash, as
// ids may hold capitals a name may not; 80 bits make a collision
// unlikely, and SessionLabel catches one.
func ClaimName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "warden-" + hex.EncodeToString(sum[:10])
}

// maxIDLen bounds a session id's length (sandbox.Manager's are 36).
const maxIDLen = 128

// checkID reports what is wrong with session id id, or nil.
func checkID(id string) error {
	if id == "" {
		return errors.New("the session id is empty: give one")
	}
	if len(id) > maxIDLen {
		return fmt.Errorf("the session id %q is over %d bytes: give a shorter one", id, maxIDLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("the session id %q has %q: use only letters, digits, '.', '_' and '-'", id, r)
		}
	}
	return nil
}

// check reports the first thing wrong with r, saying how to fix it.
func (r *Request) check() error {
	if err := checkID(r.Session); err != nil {
		return fmt.Errorf("claiming a sandbox: %w", err)
	}
	for _, f := range []struct{ name, value string }{{"owner", r.Owner}, {"template", r.Template}} {
		if f.value == "" {
			return fmt.Errorf("claiming a sandbox: the %s is empty: give one", f.name)
		}
		if errs := validation.IsValidLabelValue(f.value); len(errs) != 0 {
			return fmt.Errorf("claiming a sandbox: the %s %q is not a Kubernetes label value: %s", f.name, f.value, errs[0])
		}
	}
	if errs := validation.IsDNS1123Subdomain(r.Template); len(errs) != 0 {
		return fmt.Errorf("claiming a sandbox: template %q cannot name a SandboxWarmPool: %s", r.Template, errs[0])
	}
	if r.TTL <= 0 {
		return fmt.Errorf("claiming a sandbox: TTL %v is not positive: give the session's longest life", r.TTL)
	}
	if r.IdleTimeout <= 0 || r.IdleTimeout > r.TTL {
		return fmt.Errorf("claiming a sandbox: idle timeout %v must be positive and at most the TTL %v", r.IdleTimeout, r.TTL)
	}
	if err := r.Limits.Validate(); err != nil {
		return fmt.Errorf("claiming a sandbox: limits: %w", err)
	}
	if _, err := encodeNetwork(r.Network); err != nil {
		return fmt.Errorf("claiming a sandbox: network policy: %w", err)
	}
	return nil
}
