package podclaim

import (
	"context"
	"encoding/json"
	"fmt"

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
// patch claims can write it, so it is read as input: bounded, decoded
// strictly and every rule parsed as the egress proxy parses it.

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
// applies. An empty v (a claim made before the record
// existed, when sessions had no egress) is --net none.
func decodeNetwork(v string) (spec.NetworkPolicy, error) {
	if v == "" {
		return spec.NetworkPolicy{Mode: spec.NetNone}, nil
	}
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

// SetNetwork records n as session s's network policy on its claim (one
// merge patch, conditional on the claim's UID), before the caller puts
// it in force: a replica that re-attaches the session later must never
// apply older rules than the ones in force. A session gone is
// ErrNotFound.
func (c *Claimer) SetNetwork(ctx context.Context, s *Session, n spec.NetworkPolicy) error {
	if s.claimUID == "" {
		return fmt.Errorf("recording session %q's network policy: it has no claim UID: use what Find or Claim returned", s.ID)
	}
	v, err := encodeNetwork(n)
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
