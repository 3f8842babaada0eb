package egress

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// verdict is the policy's answer for a host and port before any name is
// resolved: refuse with status and reason, or go on (status 0) with the
// rule that allowed it.
type verdict struct {
	status int
	reason string
	// host is the normalised host: a name, or an IP literal's canonical form.
	host string
	// literal is set when the host is an IP literal; nothing is resolved.
	literal netip.Addr
}

// check applies the decision order: an invalid numeric literal, the
// address class of a literal (no rule overrides it), deny rules, then
// allow rules. host must already be lower-case without brackets or a
// trailing dot.
func (pol *Policy) check(host string, port int) verdict {
	addr, lit, numeric := ParseHostLiteral(host)
	v := verdict{host: host}
	switch {
	case lit:
		addr = addr.Unmap().WithZone("")
		v.literal, v.host = addr, addr.String()
		if c := classify(addr); !c.Allowed() {
			v.status, v.reason = http.StatusForbidden, classReason(host, addr, c)
			return v
		}
	case numeric:
		return verdict{status: http.StatusForbidden, host: host, reason: host + " is not a valid IP address"}
	case !validName(host):
		return verdict{status: http.StatusBadRequest, host: host, reason: "not a valid host name"}
	}
	for _, r := range pol.Deny {
		if r.matchHost(v.host, lit) && (r.Port == 0 || r.Port == port) {
			v.status, v.reason = http.StatusForbidden, "--deny rule "+r.String()+" matches"
			return v
		}
	}
	for _, r := range pol.Allow {
		if r.matchHost(v.host, lit) && (r.Port == port || r.Port == 0 && (port == 80 || port == 443)) {
			v.reason = "--allow rule " + r.String()
			return v
		}
	}
	v.status, v.reason = http.StatusForbidden, "no --allow rule matches ("+pol.allowList()+")"
	return v
}

// matchHost compares a normalised host with the rule. A literal host only
// matches a rule naming the same address, never a wildcard.
func (r Rule) matchHost(host string, literal bool) bool {
	if suffix, ok := strings.CutPrefix(r.Host, "*"); ok {
		return !literal && len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return host == r.Host
}

// checkAddr decides on one address a name resolved to: its class, then
// deny rules naming it. It returns a reason when the address is refused.
func (pol *Policy) checkAddr(ap netip.AddrPort) (string, bool) {
	if c := classify(ap.Addr()); !c.Allowed() {
		return string(c), false
	}
	for _, e := range embedded(ap.Addr()) {
		host := e.String()
		for _, r := range pol.Deny {
			if r.Host == host && (r.Port == 0 || r.Port == int(ap.Port())) {
				return "--deny rule " + r.String(), false
			}
		}
	}
	return "", true
}

// allowList names the allow rules for a denial, so the agent sees what it
// may use instead; long lists are cut.
func (pol *Policy) allowList() string {
	const show = 10
	if len(pol.Allow) == 0 {
		return "there are no --allow rules"
	}
	var names []string
	for i, r := range pol.Allow {
		if i == show {
			names = append(names, fmt.Sprintf("and %d more", len(pol.Allow)-show))
			break
		}
		names = append(names, r.String())
	}
	return "allowed: " + strings.Join(names, ", ")
}

// classReason explains a refused literal, naming the address it denotes
// when the spelling differs ("0x7f000001 means 127.0.0.1 (loopback)").
func classReason(host string, a netip.Addr, c Class) string {
	if host != a.String() {
		return fmt.Sprintf("%s means %s (%s), an address the sandbox may never reach", host, a, c)
	}
	return fmt.Sprintf("%s (%s) is an address the sandbox may never reach", a, c)
}

// classify is what the proxy judges an address by: Classify, and then
// whether the address is this host's own (see hostClass). It is held in a
// variable only so the tests can count their stand-in for the internet
// (203.0.113.7 on lo, a documentation address that Classify rightly calls
// reserved, on an interface of this host) as public. Nothing else assigns
// it.
var classify = hostClass
