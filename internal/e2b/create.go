package e2b

import (
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Bounds on what a sandbox keeps of its create request.
const (
	maxMetadataBytes = 64 << 10
	maxEnvBytes      = 256 << 10
	maxEnvName       = 256
)

// createSandbox answers POST /sandboxes and POST /v2/sandboxes: a new
// Warden session for the caller, registered as an E2B sandbox with fresh
// access tokens, which only this answer (and connect, for the same key)
// ever carries.
func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request, owner string) {
	var body newSandboxJSON
	if err := s.decodeBody(w, r, owner, &body, true); err != nil {
		s.writeControlError(w, err)
		return
	}
	o, err := s.options(&body, owner)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	sb, err := newSandbox(owner, &body)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	info, err := s.cfg.Sessions.Create(r.Context(), owner, o)
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	sb.ID, sb.StartedAt, sb.EndAt = info.ID, info.CreatedAt, info.ExpiresAt
	if err := s.sandboxes.add(sb); err != nil {
		s.discard(owner, info.ID)
		s.writeControlError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSandboxJSON(sb))
}

// discard ends a session that could not become a sandbox, logging a
// failure to end it.
func (s *Server) discard(owner, id string) {
	ctx, cancel := contextWithTimeout(30 * time.Second)
	defer cancel()
	if err := s.cfg.Sessions.Delete(ctx, owner, id); err != nil {
		s.log.Error("e2b: ending a session that could not be registered", "session", id, "err", err)
	}
}

// newSandbox is the E2B side of a sandbox being created: its template,
// metadata, envVars and fresh tokens.
func newSandbox(owner string, body *newSandboxJSON) (*Sandbox, error) {
	envd, err := newToken()
	if err != nil {
		return nil, err
	}
	traffic, err := newToken()
	if err != nil {
		return nil, err
	}
	return &Sandbox{
		Owner: owner, Template: body.TemplateID, EnvdToken: envd, TrafficToken: traffic,
		Metadata: body.Metadata, Env: body.EnvVars, pids: new(atomic.Uint32),
	}, nil
}

// options checks a create request and builds its session's options,
// refusing by name what Warden cannot honour rather than ignore it.
func (s *Server) options(body *newSandboxJSON, owner string) (sandbox.SessionOptions, error) {
	var o sandbox.SessionOptions
	if err := refuseUnsupported(body); err != nil {
		return o, err
	}
	var err error
	if o.Template, err = s.templateOf(body.TemplateID, owner); err != nil {
		return o, err
	}
	ttl := defaultTimeout
	if body.Timeout != nil {
		if ttl, err = timeoutSeconds(*body.Timeout); err != nil {
			return o, err
		}
	}
	if o.TTL, o.IdleTimeout, err = s.sessionLife(ttl); err != nil {
		return o, err
	}
	if err := checkMetadata(body.Metadata); err != nil {
		return o, err
	}
	if o.Env, err = envList(body.EnvVars); err != nil {
		return o, err
	}
	if o.Network, err = networkPolicy(body); err != nil {
		return o, err
	}
	o.Limits = s.cfg.Limits
	return o, nil
}

// refuseUnsupported names the first create option Warden cannot honour.
func refuseUnsupported(body *newSandboxJSON) error {
	switch {
	case body.Secure != nil && !*body.Secure:
		return badRequest("secure: false is not supported: every Warden sandbox requires its access token; leave secure at its default, true")
	case body.AutoPause != nil && *body.AutoPause, body.AutoResume != nil && body.AutoResume.Enabled:
		return badRequest("autoPause and autoResume are not supported yet: Warden pauses a sandbox when asked (Sandbox.pause) and connect resumes it, but its timeout always kills; leave onTimeout at \"kill\"")
	case present(body.MCP):
		return badRequest("mcp is not supported: Warden has no MCP gateway template; leave it out")
	case present(body.IAM):
		return badRequest("iam is not supported: Warden issues no workload tokens; leave it out")
	case len(body.VolumeMounts) > 0:
		return badRequest("volumeMounts are not supported: Warden has no volumes; leave them out")
	}
	return nil
}

// present says whether a raw JSON field was given as something but null.
func present(raw []byte) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// checkMetadata bounds the metadata a sandbox keeps.
func checkMetadata(md map[string]string) error {
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	if n > maxMetadataBytes {
		return badRequest("metadata: %d bytes of keys and values, more than the %d allowed: keep less", n, maxMetadataBytes)
	}
	return nil
}

// envList turns envVars into sorted KEY=VALUE pairs (sorted, so the same
// request always builds the same environment), checking names and size.
func envList(env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	n := 0
	for k, v := range env {
		if !envName(k) {
			return nil, badRequest("envVars: name %q is not valid: use letters, digits and _, not starting with a digit, at most %d bytes", k, maxEnvName)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, badRequest("envVars.%s: the value contains a NUL byte: remove it", k)
		}
		n += len(k) + len(v) + 1
		out = append(out, k+"="+v)
	}
	if n > maxEnvBytes {
		return nil, badRequest("envVars: %d bytes, more than the %d allowed: pass large values in a file", n, maxEnvBytes)
	}
	sort.Strings(out)
	return out, nil
}

// envName says whether k is a portable environment variable name.
func envName(k string) bool {
	if k == "" || len(k) > maxEnvName || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// networkPolicy maps E2B's network options onto Warden's policy. A Warden
// sandbox is offline unless told which hosts it may reach: allowOut's
// hosts and IPs become the egress proxy's allow rules (ports 80 and 443),
// denyOut's IPs its deny rules, and E2B's "deny everything else" idiom
// (denyOut 0.0.0.0/0) is what the proxy does anyway. allow_internet_access
// true, which e2b@2.50.0 sends on every create, opens nothing by itself.
// What cannot be mapped is refused by name.
func networkPolicy(body *newSandboxJSON) (spec.NetworkPolicy, error) {
	none := spec.NetworkPolicy{Mode: spec.NetNone}
	n := body.Network
	if n == nil {
		return none, nil
	}
	switch {
	case present(n.Rules), present(n.EgressProxy):
		return none, badRequest("network.rules and network.egressProxy are not supported: Warden's egress proxy takes only allowOut and denyOut")
	case n.MaskRequestHost != nil, len(n.HTTPSPorts) > 0:
		return none, badRequest("network.maskRequestHost and network.httpsPorts are not supported: Warden does not forward traffic to sandbox ports yet")
	}
	var allow, deny []string
	for _, a := range n.AllowOut {
		if strings.Contains(a, "/") {
			return none, badRequest("network.allowOut: %q is a CIDR block, which Warden's egress proxy cannot allow: name hosts or IP addresses", a)
		}
		allow = append(allow, a)
	}
	for _, d := range n.DenyOut {
		switch {
		case d == "0.0.0.0/0" || d == "::/0":
			// Everything not allowed is denied anyway.
		case net.ParseIP(d) != nil:
			deny = append(deny, d)
		default:
			return none, badRequest("network.denyOut: %q is not supported: give IP addresses, or 0.0.0.0/0 to deny all but allowOut", d)
		}
	}
	switch {
	case len(allow) == 0 && len(deny) > 0:
		return none, badRequest("network.denyOut without allowOut is not supported: a Warden sandbox reaches nothing unless allowOut names it")
	case len(allow) == 0:
		return none, nil
	}
	return spec.NetworkPolicy{Mode: spec.NetProxy, Allow: allow, Deny: deny}, nil
}
