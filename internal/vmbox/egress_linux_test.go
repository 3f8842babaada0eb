package vmbox

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestAttachEgress: only with --net proxy does a box get a proxy socket,
// its session the channels of its egress bridge (a box of --net none that
// opens one is then a breach: the agent's TestStreamHostileGuest and
// TestStreamGuestChannelNeedsEgressChannels), the guest agent the
// bridge's port and pace, and the box's programs HTTP(S)_PROXY; a rule
// only the proxy's parser refuses (spec.Validate takes it) is refused.
func TestAttachEgress(t *testing.T) {
	testhost.RequireRoot(t)
	lease, err := hostid.Take()
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	for _, tc := range []struct {
		name  string
		net   spec.NetworkPolicy
		proxy bool
		err   error
	}{
		{"none", spec.NetworkPolicy{Mode: spec.NetNone}, false, nil},
		{"proxy", spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.org"}}, true, nil},
		{"never reachable", spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"127.0.0.1"}}, false, spec.ErrInvalid},
	} {
		s := spec.Spec{Network: tc.net, Limits: spec.DefaultLimits}
		if err := s.Network.Validate(); err != nil {
			t.Fatalf("%s: spec.Validate refuses the rule (%v); the row is for one only the proxy's parser refuses", tc.name, err)
		}
		b := &box{r: &Runtime{}, id: boxname.Box(), lease: lease, vm: &microvm.VM{}}
		var err error
		b.att, err = agent.AttachEgressFor(b.id, s)
		if !errors.Is(err, tc.err) || (b.att != nil) != tc.proxy {
			t.Errorf("%s: AttachEgressFor = %v, socket %v; want error %v, a socket %v", tc.name, err, b.att != nil, tc.err, tc.proxy)
		}
		if err == nil {
			checkGuestEgress(t, tc.name, b, s, tc.proxy)
		}
		b.closeEgress()
	}
}

// checkGuestEgress checks that box b's frame and guest Config for s have
// the egress channels, the bridge's port and pace, and the proxy env,
// when proxy and only then.
func checkGuestEgress(t *testing.T, name string, b *box, s spec.Spec, proxy bool) {
	t.Helper()
	f := b.frame(s)
	if f.EgressChannels != proxy || (f.Egress != nil) != proxy {
		t.Errorf("%s: frame's Egress %v, EgressChannels %v; want both set %v", name, f.Egress, f.EgressChannels, proxy)
	}
	cfg := b.config(s)
	wantPort := 0
	if proxy {
		wantPort = agent.EgressPort
	}
	if paced := cfg.EgressRate > 0 && cfg.EgressBurst > 0; cfg.EgressPort != wantPort || paced != proxy {
		t.Errorf("%s: guest Config's EgressPort %d, EgressRate %v, EgressBurst %v; want port %d and a pace %v", name, cfg.EgressPort, cfg.EgressRate, cfg.EgressBurst, wantPort, proxy)
	}
	if cfg.EgressRelay {
		t.Errorf("%s: guest Config's EgressRelay set; want channels over the stream, not a relay link", name)
	}
	for what, env := range map[string][]string{"the frame's Env": f.Env(nil), "the guest Config's Env": cfg.Env} {
		if got := hasProxyEnv(env); got != proxy {
			t.Errorf("%s: %s has HTTP_PROXY %v, want %v (env %q)", name, what, got, proxy, env)
		}
	}
}

// hasProxyEnv says whether env sets HTTP_PROXY.
func hasProxyEnv(env []string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HTTP_PROXY=") })
}
