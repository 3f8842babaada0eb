package podclaim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestNetworkRoundTrip: a session's network policy, written on its claim
// at Claim, reads back the same from the claim.
func TestNetworkRoundTrip(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, n := range []spec.NetworkPolicy{
		{},
		{Mode: spec.NetNone},
		{Mode: spec.NetProxy},
		{Mode: spec.NetProxy, Allow: []string{"example.com", "*.pypi.org:443", "8.8.8.8:8080"}, Deny: []string{"bad.example.com"}},
	} {
		r := goodRequest()
		r.Network = n
		s, err := sessionOf(claimOf(t, r, now))
		if err != nil {
			t.Errorf("%+v: sessionOf = %v, want the session", n, err)
			continue
		}
		want := n
		if want.Mode == "" {
			want.Mode = spec.NetNone
		}
		if got := s.Network; got.Mode != want.Mode || !slices.Equal(got.Allow, want.Allow) || !slices.Equal(got.Deny, want.Deny) {
			t.Errorf("network read back = %+v, want %+v", got, want)
		}
	}
}

// TestNetworkMalformedRefused: the claim's record is input (whoever may
// patch claims can write it); a malformed one is refused in one line
// naming the annotation, never read as a looser policy.
func TestNetworkMalformedRefused(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tests := []struct {
		name, value, want string
	}{
		{"not JSON", `proxy`, "invalid"},
		{"an unknown field", `{"mode":"proxy","allowAll":true}`, "unknown field"},
		{"an unknown mode", `{"mode":"host"}`, `network mode "host" is unknown`},
		{"no mode", `{"allow":["example.com"]}`, "is unknown"},
		{"rules with none", `{"mode":"none","allow":["example.com"]}`, "need --net proxy"},
		{"a rule the proxy cannot parse", `{"mode":"proxy","allow":["exa mple.com"]}`, "is not HOST[:PORT]"},
		{"a bad port", `{"mode":"proxy","allow":["example.com:99999"]}`, "invalid"},
		{"trailing data", `{"mode":"none"} {"mode":"proxy"}`, "invalid"},
		{"too long", `{"mode":"proxy","allow":["` + strings.Repeat("a", maxNetworkRecord) + `"]}`, "more than the"},
		{"a duplicate key", `{"mode":"none","mode":"proxy"}`, "not the canonical form"},
		{"a duplicate list", `{"mode":"proxy","allow":["a.test"],"allow":["b.test"]}`, "not the canonical form"},
		{"case-folded keys", `{"MODE":"proxy","Allow":["example.com"]}`, "not the canonical form"},
		{"a null list", `{"mode":"proxy","allow":null}`, "not the canonical form"},
		{"an empty list", `{"mode":"proxy","deny":[]}`, "not the canonical form"},
		{"keys out of order", `{"allow":["example.com"],"mode":"proxy"}`, "not the canonical form"},
		{"spacing", `{"mode": "none"}`, "not the canonical form"},
	}
	for _, tt := range tests {
		c := claimOf(t, goodRequest(), now)
		c.Annotations[NetworkAnnotation] = tt.value
		_, err := sessionOf(c)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), NetworkAnnotation) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: sessionOf = %v, want one line naming %s and containing %q", tt.name, err, NetworkAnnotation, tt.want)
		}
	}
	// A claim made before the record existed had no egress.
	c := claimOf(t, goodRequest(), now)
	delete(c.Annotations, NetworkAnnotation)
	if s, err := sessionOf(c); err != nil || s.Network.Mode != spec.NetNone {
		t.Errorf("a claim without the record: sessionOf = %+v, %v, want --net none", s, err)
	}
}

// TestNetworkTooLargeRefusedAtClaim: rules the claim could not record
// are refused before any call, as invalid.
func TestNetworkTooLargeRefusedAtClaim(t *testing.T) {
	r := goodRequest()
	r.Network = spec.NetworkPolicy{Mode: spec.NetProxy}
	for i := range 2000 {
		r.Network.Allow = append(r.Network.Allow, strings.Repeat("a", 20)+".example.com:"+string(rune('1'+i%9)))
	}
	if err := r.check(); err == nil || !strings.Contains(err.Error(), "give fewer or shorter --allow and --deny rules") {
		t.Errorf("check of %d rules = %v, want the refusal of a record too large", len(r.Network.Allow), err)
	}
}
