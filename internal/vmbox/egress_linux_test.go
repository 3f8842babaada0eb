package vmbox

import (
	"errors"
	"testing"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestAttachEgress: a box gets a proxy socket, and its session takes the
// channels of its egress bridge, only with --net proxy: a box of --net
// none that opens a channel is then a breach (the agent's
// TestStreamHostileGuest and TestStreamGuestChannelNeedsEgressChannels),
// and a bad rule is refused.
func TestAttachEgress(t *testing.T) {
	testhost.RequireRoot(t)
	lease, err := hostid.Take()
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	for _, tc := range []struct {
		name     string
		net      spec.NetworkPolicy
		channels bool
		err      error
	}{
		{"none", spec.NetworkPolicy{Mode: spec.NetNone}, false, nil},
		{"proxy", spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.org"}}, true, nil},
		{"bad rule", spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"exa mple.org"}}, false, spec.ErrInvalid},
	} {
		b := &box{r: &Runtime{}, id: boxname.Box(), lease: lease, vm: &microvm.VM{}}
		err := b.attachEgress(spec.Spec{Network: tc.net, Limits: spec.DefaultLimits})
		f := b.frame(spec.Spec{Network: tc.net})
		if !errors.Is(err, tc.err) || f.EgressChannels != tc.channels || (f.Egress != nil) != tc.channels || f.Egress != b.att {
			t.Errorf("%s: attachEgress = %v, frame's Egress %v and EgressChannels %v; want error %v, both set %v", tc.name, err, f.Egress, f.EgressChannels, tc.err, tc.channels)
		}
		b.closeEgress()
	}
}
