package kubebed_test

import (
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/kubebed"
)

// TestNetworkPolicies: as kustomize and helm render them, sandbox Pods
// get no egress at all (a session's egress is the router's, over its
// connection to the Pod), no separate egress-proxy policy is left, and
// the router reaches public addresses on a port an --allow rule may name
// but none of the addresses the egress proxy refuses.
func TestNetworkPolicies(t *testing.T) {
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		args []string
	}{
		{"kustomize", []string{"build", filepath.Join(root, "deploy", "kustomize")}},
		{"helm", []string{"template", "warden", filepath.Join(root, "deploy", "helm", "warden")}},
	} {
		t.Run(r.name, func(t *testing.T) {
			objs := decode(t, r.name, render(t, r.name, r.args...))
			for _, o := range objs {
				if o.GetKind() == "NetworkPolicy" && o.GetName() == "egress-proxy" {
					t.Errorf("NetworkPolicy %s/egress-proxy rendered, want none: the router is the egress proxy", o.GetNamespace())
				}
			}
			sandbox := policy(t, findObject(t, objs, "NetworkPolicy", "warden-sandbox").Object)
			if !slices.Contains(sandbox.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(sandbox.Spec.Egress) != 0 {
				t.Errorf("sandbox Pods' policy: types %v, egress %+v; want Egress listed with no rule", sandbox.Spec.PolicyTypes, sandbox.Spec.Egress)
			}
			checkRouterEgress(t, policy(t, findObject(t, objs, "NetworkPolicy", "warden-router").Object))
		})
	}
}

// refusedSamples are addresses egress.Classify refuses, one or two in
// each of its IPv4 blocks and its kinds of IPv6 address (those carrying
// a non-public IPv4 address among them).
var refusedSamples = []string{
	"0.0.0.1", "10.1.2.3", "100.64.0.1", "127.0.0.1", "168.63.129.16", "169.254.169.254",
	"172.16.0.1", "192.0.0.1", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1",
	"198.19.255.255", "198.51.100.1", "203.0.113.1", "224.0.0.1", "239.255.255.255",
	"240.0.0.1", "255.255.255.255",
	"::", "::1", "::a00:1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "64:ff9b:1::a00:1",
	"2001::1", "2001:db8::1", "2002:a00:1::1", "3fff::1", "fc00::1", "fd00::1",
	"fe80::1", "fec0::1", "ff02::1",
}

// checkRouterEgress checks the router's egress rules at port 8443, which
// no rule but the internet's opens: each sample the proxy refuses is
// left out, public ones are let through. (443 and 6443 are the API
// server's rule's, open at every address until an operator narrows it.)
func checkRouterEgress(t *testing.T, p *networkingv1.NetworkPolicy) {
	t.Helper()
	const port = 8443
	for _, s := range refusedSamples {
		a := netip.MustParseAddr(s)
		if c := egress.Classify(a); c == egress.ClassPublic {
			t.Fatalf("the sample %s is public to the proxy; want only addresses it refuses", a)
		}
		if admits(p, a, port) {
			t.Errorf("the router's policy admits %s (refused by the proxy as %s) on port %d", a, egress.Classify(a), port)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "2606:4700:4700::1111"} {
		if a := netip.MustParseAddr(s); !admits(p, a, port) {
			t.Errorf("the router's policy does not admit the public %s on port %d, which an --allow rule may name", a, port)
		}
	}
}

// admits says whether a rule of p lets TCP to a:port out through an
// ipBlock (selector peers name Pods, not addresses).
func admits(p *networkingv1.NetworkPolicy, a netip.Addr, port int32) bool {
	for _, r := range p.Spec.Egress {
		if !portMatches(r.Ports, port) {
			continue
		}
		for _, peer := range r.To {
			if peer.IPBlock != nil && inBlock(peer.IPBlock, a) {
				return true
			}
		}
	}
	return false
}

// portMatches says whether ports (none: all) take TCP to port.
func portMatches(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	return slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
		tcp := p.Protocol == nil || string(*p.Protocol) == "TCP"
		return tcp && (p.Port == nil || p.Port.IntVal == port)
	})
}

// inBlock says whether a is in b's CIDR and in none of its exceptions.
func inBlock(b *networkingv1.IPBlock, a netip.Addr) bool {
	if !netip.MustParsePrefix(b.CIDR).Contains(a) {
		return false
	}
	return !slices.ContainsFunc(b.Except, func(e string) bool { return netip.MustParsePrefix(e).Contains(a) })
}

// policy converts a rendered NetworkPolicy.
func policy(t *testing.T, obj map[string]any) *networkingv1.NetworkPolicy {
	t.Helper()
	var p networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}
