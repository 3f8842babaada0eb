package podclaim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// The session's network policy is recorded on its claim so that a
// replica that re-attaches the session (another replica's, after a
// crash) attaches its egress with the same rules, not none and not the
// first ones: SetNetwork writes it before the new rules take effect. It
// is not secret (the rules are the tenant's allowlist), but whoever may
// patch claims can write it, and a record they wrote would widen the
// session's egress (none to proxy, a --deny dropped) at the next
// re-attach. So the record is sealed: an HMAC with the router key over
// a version, the claim's UID, the session's id and the rules
// (networkSeal), checked before the rules are read; a record that fails
// is refused, never read as --net none. It is read as input all the
// same: bounded, decoded strictly and every rule parsed as the egress
// proxy parses it.
//
// The seal binds the record to its claim and session, not to a time:
// an earlier record of the same claim (rules the tenant set before a
// SetNetwork) can be put back by whoever may patch claims. See
// docs/kubernetes.md, "Egress".

// networkVersion prefixes a sealed record ("v1.<hex HMAC>.<JSON>") and
// is in its HMAC, so that a later format can never read as this one.
const networkVersion = "v1"

// networkContext separates the record's HMAC from the router key's
// other uses (owner labels, holders' proofs, Pods' keys).
const networkContext = "warden kube network record\x00"

// errNetworkSeal is a network record whose seal does not check: written
// by another than a Warden replica, or copied from another claim.
var errNetworkSeal = errors.New("its seal is not the router key's for this claim and session")

// errNetworkUnsealed is a network record not in the sealed form at all
// (none, or bare rules): what a replica of a version before records were
// sealed wrote, as well as what a hand may write.
var errNetworkUnsealed = errors.New("not sealed")

// networkSeal is the HMAC, with key, of the canonical record js of
// session id on the claim uid.
func networkSeal(key []byte, uid types.UID, id, js string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(networkContext + networkVersion + "\x00" + string(uid) + "\x00" + id + "\x00" + js))
	return m.Sum(nil)
}

// sealNetwork is NetworkAnnotation's value recording n for session id
// on the claim uid, sealed with key.
func sealNetwork(key []byte, uid types.UID, id string, n spec.NetworkPolicy) (string, error) {
	js, err := encodeNetwork(n)
	if err != nil {
		return "", err
	}
	return networkVersion + "." + hex.EncodeToString(networkSeal(key, uid, id, js)) + "." + js, nil
}

// openNetwork is the policy NetworkAnnotation's value v records for
// session id on the claim uid, refusing, in one line, a value that is
// missing (a claim whose Pod is recorded always has one), not of the
// version Warden writes, whose seal does not check, or whose rules
// decodeNetwork refuses.
func openNetwork(key []byte, uid types.UID, id, v string) (spec.NetworkPolicy, error) {
	if v == "" {
		return spec.NetworkPolicy{}, fmt.Errorf("%w: there is none", errNetworkUnsealed)
	}
	rest, ok := strings.CutPrefix(v, networkVersion+".")
	seal, js, found := strings.Cut(rest, ".")
	if !ok || !found {
		return spec.NetworkPolicy{}, fmt.Errorf("%w: not %s.<seal>.<rules>, the form Warden writes", errNetworkUnsealed, networkVersion)
	}
	got, err := hex.DecodeString(seal)
	if err != nil || !hmac.Equal(got, networkSeal(key, uid, id, js)) {
		return spec.NetworkPolicy{}, errNetworkSeal
	}
	return decodeNetwork(js)
}

// maxNetworkRecord bounds NetworkAnnotation's value, well under the API
// server's 256 KiB for all of an object's annotations.
const maxNetworkRecord = 32 << 10

// networkRecord is NetworkAnnotation's JSON.
type networkRecord struct {
	Mode  spec.NetMode `json:"mode"`
	Allow []string     `json:"allow,omitempty"`
	Deny  []string     `json:"deny,omitempty"`
}

// encodeNetwork is n as NetworkAnnotation's value, refusing a policy
// that would not read back (checkNetwork).
func encodeNetwork(n spec.NetworkPolicy) (string, error) {
	if n.Mode == "" {
		n.Mode = spec.NetNone
	}
	b, err := json.Marshal(networkRecord{Mode: n.Mode, Allow: n.Allow, Deny: n.Deny})
	if err != nil {
		return "", fmt.Errorf("encoding the network policy: %w", err)
	}
	if len(b) > maxNetworkRecord {
		return "", fmt.Errorf("%w: the network rules take %d bytes, more than the %d a session's claim records: give fewer or shorter --allow and --deny rules", spec.ErrInvalid, len(b), maxNetworkRecord)
	}
	if _, err := decodeNetwork(string(b)); err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeNetwork reads NetworkAnnotation's value v, refusing in one line
// one too long, not exactly a networkRecord, with a rule the egress
// proxy would not parse, or not byte-equal to the canonical form
// encodeNetwork writes (a duplicate or case-folded key, a null or empty
// list, other spacing or order): a reader or admission policy that
// takes the first of two keys must never see other rules than Warden
// applies.
func decodeNetwork(v string) (spec.NetworkPolicy, error) {
	if len(v) > maxNetworkRecord {
		return spec.NetworkPolicy{}, fmt.Errorf("%w: %d bytes, more than the %d Warden writes", spec.ErrInvalid, len(v), maxNetworkRecord)
	}
	var r networkRecord
	if err := strictjson.Decode([]byte(v), &r); err != nil {
		return spec.NetworkPolicy{}, fmt.Errorf("%w: %w", spec.ErrInvalid, err)
	}
	n := spec.NetworkPolicy{Mode: r.Mode, Allow: r.Allow, Deny: r.Deny}
	if err := n.Validate(); err != nil {
		return spec.NetworkPolicy{}, err
	}
	if n.Mode == spec.NetProxy {
		if _, err := egress.ParsePolicy(n.Allow, n.Deny); err != nil {
			return spec.NetworkPolicy{}, fmt.Errorf("%w: %v", spec.ErrInvalid, err) //nolint:errorlint // the sentinel is the category; the parse error is text only
		}
	}
	canon, err := json.Marshal(r)
	if err != nil {
		return spec.NetworkPolicy{}, fmt.Errorf("re-encoding the network policy: %w", err)
	}
	if string(canon) != v {
		return spec.NetworkPolicy{}, fmt.Errorf("%w: not the canonical form Warden writes (%s): a duplicate or case-folded key, a null or empty list, or other spacing or order; set the rules with warden's SetNetwork, not by hand", spec.ErrInvalid, canon)
	}
	return n, nil
}

// SetNetwork records n as session s's network policy on its claim,
// sealed (one merge patch, conditional on the claim's UID), before the
// caller puts it in force: a replica that re-attaches the session later
// must never apply older rules than the ones in force. A session gone
// is ErrNotFound.
func (c *Claimer) SetNetwork(ctx context.Context, s *Session, n spec.NetworkPolicy) error {
	if s.claimUID == "" {
		return fmt.Errorf("recording session %q's network policy: it has no claim UID: use what Find or Claim returned", s.ID)
	}
	v, err := sealNetwork(c.cfg.RouterKey, s.claimUID, s.ID, n)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.claimUID, "annotations": map[string]string{NetworkAnnotation: v},
	}})
	if err != nil {
		return fmt.Errorf("encoding session %q's network policy: %w", s.ID, err)
	}
	err = c.ext.Patch(types.MergePatchType).Namespace(c.cfg.Namespace).Resource(claimsResource).Name(s.Claim).Body(patch).Do(ctx).Error()
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) || uidChanged(err):
		return fmt.Errorf("recording session %q's network policy: %w", s.ID, ErrNotFound)
	}
	return fmt.Errorf("recording session %q's network policy on claim %s: %w", s.ID, s.Claim, err)
}

// network is session s's recorded network policy, its seal checked with
// the router key: a record that fails is logged in full for the
// operator (an unsealed one as what it most likely is, a claim recorded
// before an upgrade) and is ErrDead for the tenant, in one line naming
// no detail, never read as another policy.
func (c *Claimer) network(s *Session) (spec.NetworkPolicy, error) {
	n, err := openNetwork(c.cfg.RouterKey, s.claimUID, s.ID, s.networkRecord)
	if err == nil {
		return n, nil
	}
	warn := c.log.Warn
	if !c.warnRefusal(s.claimUID) {
		warn = c.log.Debug
	}
	switch {
	case errors.Is(err, errNetworkUnsealed):
		warn("refusing a session whose claim's network record is not sealed: recorded by a replica of a version before records were sealed (such sessions end across the upgrade), or written by hand", "session", s.ID, "claim", s.Claim, "annotation", NetworkAnnotation, "err", err)
	default:
		warn("refusing a session whose claim's network record fails its check: someone other than a Warden replica wrote it", "session", s.ID, "claim", s.Claim, "annotation", NetworkAnnotation, "err", err)
	}
	return spec.NetworkPolicy{}, fmt.Errorf("session %q: %w: %s", s.ID, ErrDead, refusedNetwork)
}

// Bounds of the warnings of refused network records: a client retrying
// a refused session must not turn each request into a warning.
const (
	// refusedWarnEvery is how often one claim's refusal is warned of;
	// the others in between are logged at debug level.
	refusedWarnEvery = 10 * time.Minute
	// maxRefusedWarned bounds the claims remembered as warned of.
	maxRefusedWarned = 1024
)

// warnRefusal is whether the refusal of the claim uid's network record
// is to be warned of: not within refusedWarnEvery of the last.
func (c *Claimer) warnRefusal(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t, ok := c.refused[uid]; ok && now.Sub(t) < refusedWarnEvery {
		return false
	}
	if c.refused == nil || len(c.refused) >= maxRefusedWarned {
		c.refused = map[types.UID]time.Time{}
	}
	c.refused[uid] = now
	return true
}

// refusedNetwork is the tenant's reason for a session whose network
// record fails its check.
const refusedNetwork = "its recorded network policy is not one this server version sealed (recorded by an earlier version, or edited outside Warden), so it is refused; it is released at its idle timeout"
