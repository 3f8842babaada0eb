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
	// SessionLabel holds the session's id; the claim's name is derived
	// from it (ClaimName), the label guards against a collision.
	SessionLabel = keyPrefix + "session"
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
)

// Request is what a new session needs from a claim.
type Request struct {
	// Session is Warden's id of the session: a Kubernetes label value
	// (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends).
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
}

// Session is a claimed sandbox Pod, as any replica sees it.
type Session struct {
	// ID, Owner and Template are the Request's, read back from labels.
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
	// IdleTimeout and LastActive decide the idle reap.
	IdleTimeout time.Duration
	LastActive  time.Time
	// Limits are the Request's, for the replica that serves an exec.
	Limits spec.Limits

	claimUID        types.UID
	resourceVersion string
}

// ClaimName is the name of the claim of session id: derived from the id
// so that a session's claim is one GET away from any replica and a
// second claim for the same id fails as AlreadyExists. It is a hash, as
// ids may hold capitals a name may not; 80 bits make a collision
// unlikely, and SessionLabel catches one.
func ClaimName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "warden-" + hex.EncodeToString(sum[:10])
}

// check reports the first thing wrong with r, saying how to fix it.
func (r *Request) check() error {
	for _, f := range []struct{ name, value string }{{"session id", r.Session}, {"owner", r.Owner}, {"template", r.Template}} {
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
	return nil
}
