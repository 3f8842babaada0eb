package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Defaults for a Policy's limits, applied where a field is zero.
const (
	// DefaultMaxConns bounds a sandbox's concurrent tunnels and requests:
	// enough for parallel package downloads, few enough that one sandbox
	// cannot exhaust the Warden process's descriptors.
	DefaultMaxConns = 64
	// ServerDescriptors bounds the descriptors one sandbox's proxy holds
	// in the Warden process with DefaultMaxConns: up to twice that many
	// client connections while their headers arrive (the ones past the
	// cap are answered 429), an upstream one for each of at most
	// DefaultMaxConns tunnels and requests, and 9 of its own (listener,
	// pipes, and files it opens for a moment).
	ServerDescriptors = 3*DefaultMaxConns + 9
	// DefaultMaxBytes bounds what one sandbox moves in total, both ways.
	DefaultMaxBytes int64 = 1 << 30
)

// Rule is one HOST[:PORT] policy rule, checked and normalised by
// ParsePolicy so that matching is a plain comparison.
type Rule struct {
	// Host is a lower-case name without a trailing dot, "*.example.com"
	// (any name below example.com, never example.com itself), or an IP
	// address in canonical form (IPv4-mapped addresses unmapped).
	Host string
	// Port is the one port the rule covers. Zero means 80 and 443 for an
	// Allow rule, and every port for a Deny rule: a deny that names no
	// port must not leave other ports open.
	Port int
}

// String gives the rule back as HOST[:PORT], as a user would write it.
func (r Rule) String() string {
	h := r.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if r.Port == 0 {
		return h
	}
	return h + ":" + strconv.Itoa(r.Port)
}

// Policy is what one sandbox may reach through the proxy and how much.
type Policy struct {
	// Allow lists what may be reached; nothing else may. Deny wins over
	// Allow.
	Allow, Deny []Rule
	// MaxConns bounds concurrent tunnels and requests (0: DefaultMaxConns).
	MaxConns int
	// MaxBytes bounds the bytes moved both ways over the attachment's life
	// (0: DefaultMaxBytes).
	MaxBytes int64
}

// ParsePolicy turns --allow and --deny strings into a Policy. Errors are
// one line naming the bad rule. A rule is a name, "*.name" or an IP
// literal (IPv6 in brackets when a port follows: [2001:db8::1]:443), with
// an optional port in 1..65535. An allow rule naming an address the
// sandbox may never reach (loopback, private, ...) is an error rather than
// a rule that silently never matches.
func ParsePolicy(allow, deny []string) (Policy, error) {
	var pol Policy
	for _, s := range allow {
		r, err := parseRule(s, true)
		if err != nil {
			return Policy{}, err
		}
		pol.Allow = append(pol.Allow, r)
	}
	for _, s := range deny {
		r, err := parseRule(s, false)
		if err != nil {
			return Policy{}, err
		}
		pol.Deny = append(pol.Deny, r)
	}
	return pol, nil
}

func parseRule(s string, allow bool) (Rule, error) {
	kind := "--deny"
	if allow {
		kind = "--allow"
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("egress: %s rule %q: %s", kind, s, fmt.Sprintf(format, args...))
	}
	host, port, err := splitRule(s)
	if err != nil {
		return Rule{}, bad("%v", err)
	}
	r := Rule{Port: port}
	host = normHost(host)
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		if _, lit, numeric := ParseHostLiteral(suffix); lit || numeric || !validName(suffix) {
			return Rule{}, bad("a wildcard must be *. followed by a host name")
		}
		r.Host = host
		return r, nil
	}
	addr, lit, numeric := ParseHostLiteral(host)
	switch {
	case lit:
		addr = addr.Unmap()
		if c := classify(addr); allow && !c.Allowed() {
			return Rule{}, bad("%s (%s) is an address the sandbox may never reach", addr, c)
		}
		r.Host = addr.String()
	case numeric:
		return Rule{}, bad("%s is not a valid IP address", host)
	case !validName(host):
		return Rule{}, bad("not HOST[:PORT] with a host name, *.name or an IP address")
	default:
		r.Host = host
	}
	return r, nil
}

// splitRule splits HOST[:PORT]; an IPv6 host must be bracketed.
func splitRule(s string) (host string, port int, err error) {
	rest := ""
	if h, ok := strings.CutPrefix(s, "["); ok {
		h, rest, ok = strings.Cut(h, "]")
		if !ok {
			return "", 0, fmt.Errorf("missing ]")
		}
		if a, err := netip.ParseAddr(h); err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, fmt.Errorf("[%s] is not an IPv6 address", h)
		}
		host = h
		if rest == "" {
			return host, 0, nil
		}
		if rest, ok = strings.CutPrefix(rest, ":"); !ok {
			return "", 0, fmt.Errorf("unexpected %q after ]", rest)
		}
	} else {
		switch strings.Count(s, ":") {
		case 0:
			return s, 0, nil
		case 1:
			host, rest, _ = strings.Cut(s, ":")
		default:
			return "", 0, fmt.Errorf("an IPv6 address needs brackets: [addr]:port")
		}
	}
	port, ok := parsePort(rest)
	if !ok {
		return "", 0, fmt.Errorf("port %q is not in 1..65535", rest)
	}
	return host, port, nil
}

// parsePort accepts decimal digits only (no sign, no spaces) in 1..65535.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, _ := strconv.Atoi(s)
	return n, n >= 1 && n <= 65535
}

// normHost lower-cases a host and drops one trailing dot, the form rules
// and requests are compared in.
func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// validName reports whether h is a lower-case DNS name: labels of 1..63
// letters, digits, '-' or '_', at most 253 bytes in all.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	return true
}

// withDefaults fills the zero limits.
func (pol Policy) withDefaults() Policy {
	if pol.MaxConns <= 0 {
		pol.MaxConns = DefaultMaxConns
	}
	if pol.MaxBytes <= 0 {
		pol.MaxBytes = DefaultMaxBytes
	}
	return pol
}
