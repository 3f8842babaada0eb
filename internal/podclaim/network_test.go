package podclaim

import (
	"bytes"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestNetworkRoundTrip: a session's network policy, recorded sealed on
// its claim, reads back the same from the claim.
func TestNetworkRoundTrip(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	c := &Claimer{cfg: Config{RouterKey: testKey}, log: slog.Default()}
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
		got, err := c.network(s)
		if err != nil {
			t.Errorf("%+v: network = %v, want the policy", n, err)
			continue
		}
		want := n
		if want.Mode == "" {
			want.Mode = spec.NetNone
		}
		if got.Mode != want.Mode || !slices.Equal(got.Allow, want.Allow) || !slices.Equal(got.Deny, want.Deny) {
			t.Errorf("network read back = %+v, want %+v", got, want)
		}
	}
}

// TestNetworkSealRefused: whoever may patch claims can write the record;
// one the router key did not seal for this claim and session (rules
// changed, copied from another claim or session, sealed with another
// key, of another version, or unsealed as before records were sealed)
// or none at all is refused, as ErrDead in one line that names no
// detail (the log has it), never read as another policy or as none.
func TestNetworkSealRefused(t *testing.T) {
	const id, uid = "s-1", types.UID("claim-uid")
	proxy := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.com"}, Deny: []string{"bad.example.com"}}
	seal := func(key []byte, uid types.UID, id string, n spec.NetworkPolicy) string {
		t.Helper()
		v, err := sealNetwork(key, uid, id, n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	good := seal(testKey, uid, id, spec.NetworkPolicy{Mode: spec.NetNone})
	mac, _, _ := strings.Cut(strings.TrimPrefix(good, networkVersion+"."), ".")
	otherKey := bytes.Repeat([]byte{0x6c}, len(testKey))
	tests := []struct{ name, value, logged string }{
		{"none turned into proxy", networkVersion + "." + mac + `.{"mode":"proxy","allow":["*"]}`, errNetworkSeal.Error()},
		{"a deny rule dropped", networkVersion + "." + hex.EncodeToString(networkSeal(testKey, uid, id, `{"mode":"proxy","allow":["example.com"],"deny":["bad.example.com"]}`)) + `.{"mode":"proxy","allow":["example.com"]}`, errNetworkSeal.Error()},
		{"another claim's record", seal(testKey, "other-claim", id, proxy), errNetworkSeal.Error()},
		{"another session's record", seal(testKey, uid, "s-2", proxy), errNetworkSeal.Error()},
		{"sealed with another key", seal(otherKey, uid, id, proxy), errNetworkSeal.Error()},
		{"another version", "v2" + strings.TrimPrefix(seal(testKey, uid, id, proxy), networkVersion), "the form Warden writes"},
		{"unsealed", `{"mode":"proxy","allow":["example.com"]}`, "the form Warden writes"},
		{"a seal not hex", networkVersion + ".zz." + `{"mode":"none"}`, errNetworkSeal.Error()},
		{"no rules", networkVersion + "." + mac, "the form Warden writes"},
		{"none recorded", "", "there is none"},
	}
	for _, tt := range tests {
		var log bytes.Buffer
		c := &Claimer{cfg: Config{RouterKey: testKey}, log: slog.New(slog.NewTextHandler(&log, nil))}
		got, err := c.network(&Session{ID: id, Claim: ClaimName(id), claimUID: uid, networkRecord: tt.value})
		if !errors.Is(err, ErrDead) || !strings.HasSuffix(err.Error(), refusedNetwork) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: network = %+v, %v; want ErrDead in one line ending %q", tt.name, got, err, refusedNetwork)
		}
		if !strings.Contains(log.String(), tt.logged) || !strings.Contains(log.String(), ClaimName(id)) {
			t.Errorf("%s: logged %q, want the claim and %q", tt.name, log.String(), tt.logged)
		}
		// An unsealed record is most likely an earlier version's: the
		// log must not send the operator looking for an attacker alone.
		unsealed := strings.Contains(tt.logged, "the form Warden writes") || strings.Contains(tt.logged, "there is none")
		if got := strings.Contains(log.String(), "before records were sealed"); got != unsealed {
			t.Errorf("%s: logged %q: names an earlier version: %v, want %v", tt.name, log.String(), got, unsealed)
		}
	}
}

// TestNetworkMalformedRefused: a record is input even under a good seal
// (a replica of another version may have written it); a malformed one
// is refused in one line, never read as a looser policy.
func TestNetworkMalformedRefused(t *testing.T) {
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
		{"empty", ``, "invalid"},
	}
	for _, tt := range tests {
		sealed := networkVersion + "." + hex.EncodeToString(networkSeal(testKey, "u", "s-1", tt.value)) + "." + tt.value
		_, err := openNetwork(testKey, "u", "s-1", sealed)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: openNetwork = %v, want one line containing %q", tt.name, err, tt.want)
		}
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

// TestNetworkRefusalWarnedOnce: a client retrying a session whose record
// is refused gets the refusal every time, but the operator one warning
// per claim per refusedWarnEvery, not one per request.
func TestNetworkRefusalWarnedOnce(t *testing.T) {
	var log bytes.Buffer
	c := &Claimer{cfg: Config{RouterKey: testKey}, log: slog.New(slog.NewTextHandler(&log, nil))}
	for range 3 {
		if _, err := c.network(&Session{ID: "s-1", Claim: ClaimName("s-1"), claimUID: "claim-uid", networkRecord: `{"mode":"proxy"}`}); !errors.Is(err, ErrDead) {
			t.Fatalf("network of an unsealed record: %v, want ErrDead", err)
		}
	}
	if got := strings.Count(log.String(), "level=WARN"); got != 1 {
		t.Errorf("three refusals of one claim: %d warnings, want 1:\n%s", got, log.String())
	}
	if _, err := c.network(&Session{ID: "s-2", Claim: ClaimName("s-2"), claimUID: "other-uid"}); !errors.Is(err, ErrDead) || strings.Count(log.String(), "level=WARN") != 2 {
		t.Errorf("another claim's refusal: %v, with %d warnings in all; want ErrDead and its own warning", err, strings.Count(log.String(), "level=WARN"))
	}
}
