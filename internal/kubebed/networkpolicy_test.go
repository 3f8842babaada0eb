package kubebed_test

import (
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

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

// apiServerPorts are the API server rule's ports, open at every address
// until an operator narrows its ipBlock (docs/kubernetes.md): the one
// known exception to checkRouterEgress.
var apiServerPorts = []int32{443, 6443}

// checkRouterEgress checks the router's egress rules at every TCP port
// a rule names and at 8443, which none names (but the internet's rule
// opens, as every port): every block the proxy refuses, as
// egress.RefusedBlocks gives Classify's own tables (one source: a block
// added there and not to deploy/ fails here), is left out whole, and so
// are the IPv6 blocks that carry an IPv4 address and everything outside
// global unicast (the policy is stricter there than the proxy, which
// lets through those carrying a public IPv4 address); public addresses
// are let through at 8443. (apiServerPorts are left out.)
func checkRouterEgress(t *testing.T, p *networkingv1.NetworkPolicy) {
	t.Helper()
	const port = 8443
	b := egress.RefusedBlocks()
	blocks := append(slices.Clone(b.Refused), b.Embedding...)
	blocks = append(blocks, outside(b.Global)...)
	for _, port := range append(namedPorts(p), port) {
		if slices.Contains(apiServerPorts, port) {
			continue
		}
		for _, pre := range blocks {
			if !excludes(p, pre, port) {
				t.Errorf("the router's policy admits addresses of %s (refused by the proxy) on port %d", pre, port)
			}
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "2606:4700:4700::1111"} {
		if a := netip.MustParseAddr(s); !admits(p, a, port) {
			t.Errorf("the router's policy does not admit the public %s on port %d, which an --allow rule may name", a, port)
		}
	}
}

// namedPorts is every TCP port number p's egress rules name (the first
// and last of a range).
func namedPorts(p *networkingv1.NetworkPolicy) []int32 {
	var out []int32
	for _, r := range p.Spec.Egress {
		for _, pp := range r.Ports {
			if pp.Port == nil || pp.Port.Type != intstr.Int || (pp.Protocol != nil && *pp.Protocol != corev1.ProtocolTCP) {
				continue
			}
			out = append(out, pp.Port.IntVal)
			if pp.EndPort != nil {
				out = append(out, *pp.EndPort)
			}
		}
	}
	return out
}

// outside is every address of p's family not in p, as prefixes: for
// each of p's bits, the block that agrees with p before it and not at it.
func outside(p netip.Prefix) []netip.Prefix {
	b := p.Masked().Addr().AsSlice()
	var out []netip.Prefix
	for i := range p.Bits() {
		flip := slices.Clone(b)
		flip[i/8] ^= 0x80 >> (i % 8)
		a, _ := netip.AddrFromSlice(flip)
		out = append(out, netip.PrefixFrom(a, i+1).Masked())
	}
	return out
}

// excludes says whether p admits no address of pre on TCP port: no
// rule on that port (a named port counts as any) has no peers (which
// admits every address), and every ipBlock of one either misses pre or
// has an exception holding all of it.
func excludes(p *networkingv1.NetworkPolicy, pre netip.Prefix, port int32) bool {
	for _, r := range p.Spec.Egress {
		if !portMatches(r.Ports, port, true) {
			continue
		}
		if len(r.To) == 0 {
			return false
		}
		for _, peer := range r.To {
			if peer.IPBlock == nil || !netip.MustParsePrefix(peer.IPBlock.CIDR).Overlaps(pre) {
				continue
			}
			if !slices.ContainsFunc(peer.IPBlock.Except, func(e string) bool {
				ep := netip.MustParsePrefix(e)
				return ep.Bits() <= pre.Bits() && ep.Contains(pre.Addr())
			}) {
				return false
			}
		}
	}
	return true
}

// admits says whether a rule of p lets TCP to a:port out through an
// ipBlock or having no peers, which admits every address (selector
// peers name Pods, not addresses; a named port counts as none).
func admits(p *networkingv1.NetworkPolicy, a netip.Addr, port int32) bool {
	for _, r := range p.Spec.Egress {
		if !portMatches(r.Ports, port, false) {
			continue
		}
		if len(r.To) == 0 {
			return true
		}
		for _, peer := range r.To {
			if peer.IPBlock != nil && inBlock(peer.IPBlock, a) {
				return true
			}
		}
	}
	return false
}

// portMatches says whether ports (none: all) take TCP to port, a range
// (endPort) holding it; named says what a named port counts as, as the
// name stands for a number on the destination Pod that a policy alone
// does not tell.
func portMatches(ports []networkingv1.NetworkPolicyPort, port int32, named bool) bool {
	if len(ports) == 0 {
		return true
	}
	return slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
		switch {
		case p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP:
			return false
		case p.Port == nil:
			return true
		case p.Port.Type != intstr.Int:
			return named
		case p.EndPort != nil:
			return p.Port.IntVal <= port && port <= *p.EndPort
		}
		return p.Port.IntVal == port
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

// TestPolicyCheck: the policy check's own blind spots are closed: a
// rule with no peers admits every address, a port range or a named port
// covers the port, and a rule for UDP alone does not.
func TestPolicyCheck(t *testing.T) {
	refused := netip.MustParsePrefix("10.0.0.0/8")
	public := netip.MustParseAddr("8.8.8.8")
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	end := int32(65535)
	one, named := intstr.FromInt32(1), intstr.FromString("https")
	tests := []struct {
		name          string
		rule          networkingv1.NetworkPolicyEgressRule
		excl, admitOK bool
	}{
		{"no peers", networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp}}}, false, true},
		{"a port range, no peers", networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: &one, EndPort: &end}}}, false, true},
		{"a named port, no peers", networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: &named}}}, false, false},
		{"UDP only, no peers", networkingv1.NetworkPolicyEgressRule{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp}}}, true, false},
		{"the internet less the refused", networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}},
		}}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{tt.rule}}}
			if got := excludes(p, refused, 8443); got != tt.excl {
				t.Errorf("excludes %s on 8443: got %v, want %v", refused, got, tt.excl)
			}
			if got := admits(p, public, 8443); got != tt.admitOK {
				t.Errorf("admits %s on 8443: got %v, want %v", public, got, tt.admitOK)
			}
		})
	}
}
