package agent

import (
	"errors"
	"testing"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestAttachEgressFor: only a spec with --net proxy gets a socket on the
// egress proxy, and a rule only the proxy's parser refuses (spec.Validate
// takes it) is refused with spec.ErrInvalid.
func TestAttachEgressFor(t *testing.T) {
	tests := []struct {
		name  string
		net   spec.NetworkPolicy
		proxy bool
		err   error
	}{
		{"none", spec.NetworkPolicy{Mode: spec.NetNone}, false, nil},
		{"proxy", spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.org"}}, true, nil},
		{"never reachable", spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"127.0.0.1"}}, false, spec.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec.Spec{Network: tt.net, Limits: spec.DefaultLimits}
			if err := s.Network.Validate(); err != nil {
				t.Fatalf("spec.Validate refuses the rule (%v); the row is for one only the proxy's parser refuses", err)
			}
			att, err := AttachEgressFor(boxname.Box(), s)
			if att != nil {
				defer func() {
					if err := att.Close(); err != nil {
						t.Errorf("closing the socket: %v", err)
					}
				}()
			}
			if !errors.Is(err, tt.err) || (att != nil) != tt.proxy {
				t.Errorf("AttachEgressFor = %v, socket %v; want error %v, a socket %v", err, att != nil, tt.err, tt.proxy)
			}
		})
	}
}
