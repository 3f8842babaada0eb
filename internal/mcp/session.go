package mcp

import (
	"context"
	"errors"
	"fmt"
	"github.com/warden-sandbox/warden/internal/template"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

type createSessionIn struct {
	TTLSeconds         int       `json:"ttl_seconds,omitempty" jsonschema:"the session's longest life in seconds (default: the server's, usually an hour)"`
	IdleTimeoutSeconds int       `json:"idle_timeout_seconds,omitempty" jsonschema:"end the session after this many seconds without a call (default: the server's, usually 10 minutes)"`
	Network            networkIn `json:"network,omitzero" jsonschema:"network access; omit for none"`
	Template           string    `json:"template,omitempty" jsonschema:"the template the sandbox starts from: host (the default, the server's own software) or a name list_templates gives"`
}

// templatePattern is what a template name may be (template.NamePattern),
// so a malformed name is refused by the schema, naming the field.
const templatePattern = template.NamePattern

type networkIn struct {
	Mode  string   `json:"mode" jsonschema:"none (no network, the default) or proxy (only the hosts in allow, through Warden's egress proxy)"`
	Allow []string `json:"allow,omitempty" jsonschema:"with mode proxy: hosts the sandbox may reach, HOST or HOST:PORT, *.example.com wildcards allowed, e.g. [\"pypi.org\", \"*.pythonhosted.org\"]"`
}

type sessionIn struct {
	SessionID string `json:"session_id" jsonschema:"the id create_session returned"`
}

type sessionOut struct {
	SessionID          string    `json:"session_id" jsonschema:"pass this to run_code, run_command and the file tools"`
	ExpiresAt          time.Time `json:"expires_at" jsonschema:"when the session ends at the latest"`
	IdleTimeoutSeconds int64     `json:"idle_timeout_seconds" jsonschema:"the session ends after this many seconds without a call"`
	Limits             limitsOut `json:"limits"`
	Network            networkIn `json:"network"`
	Template           string    `json:"template" jsonschema:"the template the session runs on"`
}

type limitsOut struct {
	MemoryBytes    int64   `json:"memory_bytes" jsonschema:"memory limit, files in /workspace and /tmp included (0: none)"`
	CPUs           float64 `json:"cpus" jsonschema:"CPU cores (0: no limit)"`
	Pids           int64   `json:"pids" jsonschema:"most processes and threads at once (0: none)"`
	DiskBytes      int64   `json:"disk_bytes" jsonschema:"size of the writable disk: /workspace, /tmp and home together"`
	TimeoutSeconds float64 `json:"timeout_seconds" jsonschema:"default time limit of each call"`
}

type closeOut struct {
	SessionID string `json:"session_id"`
	Closed    bool   `json:"closed"`
}

// createSession builds a session with the server's limits; the network is
// the caller's to choose only if the server allows it.
func (t *tools) createSession(ctx context.Context, req *sdk.CallToolRequest, in createSessionIn) (*sdk.CallToolResult, sessionOut, error) {
	o := t.sessionOptions()
	o.TTL, o.IdleTimeout = seconds(in.TTLSeconds), seconds(in.IdleTimeoutSeconds)
	switch in.Network.Mode {
	case "", string(spec.NetNone):
		if len(in.Network.Allow) > 0 {
			return nil, sessionOut{}, errors.New(`create_session: network.allow needs network.mode "proxy"`)
		}
	case string(spec.NetProxy):
		if !t.opts.AllowNetwork {
			return nil, sessionOut{}, errors.New("create_session: network access is disabled on this server; sandboxes have no network (the operator can allow it with warden mcp --allow-network)")
		}
		o.Network = spec.NetworkPolicy{Mode: spec.NetProxy, Allow: in.Network.Allow}
	}
	o.Template = in.Template
	owner := t.owner(req)
	info, err := t.m.Create(ctx, owner, o)
	if err != nil {
		if in.Template != "" && errors.Is(err, spec.ErrInvalid) {
			return nil, sessionOut{}, fmt.Errorf("create_session: %w; list_templates names the templates this server has", err)
		}
		return nil, sessionOut{}, wardenError("create_session", err)
	}
	if t.created != nil && !t.created.add(owner, info.ID) {
		// The client is gone: nobody could use or close the session.
		_ = t.m.Delete(context.WithoutCancel(ctx), owner, info.ID)
		return nil, sessionOut{}, errors.New("create_session: the client disconnected")
	}
	out := toSessionOut(info)
	text := fmt.Sprintf("session %s is ready on template %s. Pass session_id to run_code, run_command, write_file, read_file and list_files: "+
		"interpreter variables and files in /workspace persist between calls. Limits: %s; each call %s unless timeout_seconds says otherwise. "+
		"Network: %s. It ends after %s without a call, at %s at the latest, or on close_session.",
		info.ID, out.Template, describeLimits(info.Limits), info.Limits.Timeout, describeNetwork(info.Network),
		info.IdleTimeout, info.ExpiresAt.UTC().Format(time.RFC3339))
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
}

// closeSession deletes one of the caller's sessions.
func (t *tools) closeSession(ctx context.Context, req *sdk.CallToolRequest, in sessionIn) (*sdk.CallToolResult, closeOut, error) {
	if err := t.m.Delete(ctx, t.owner(req), in.SessionID); err != nil {
		return nil, closeOut{}, wardenError("close_session", err)
	}
	if t.created != nil {
		t.created.remove(in.SessionID)
	}
	text := fmt.Sprintf("session %s is closed; its processes and files are gone.", in.SessionID)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, closeOut{SessionID: in.SessionID, Closed: true}, nil
}

func toSessionOut(info sandbox.Info) sessionOut {
	l := info.Limits
	return sessionOut{
		SessionID: info.ID, ExpiresAt: info.ExpiresAt.UTC(), IdleTimeoutSeconds: int64(info.IdleTimeout.Seconds()),
		Limits: limitsOut{
			MemoryBytes: l.MemoryBytes, CPUs: l.CPUs, Pids: l.Pids, DiskBytes: l.DiskBytes, TimeoutSeconds: l.Timeout.Seconds(),
		},
		Network:  networkIn{Mode: string(info.Network.Mode), Allow: info.Network.Allow},
		Template: sandbox.TemplateName(info.Template),
	}
}

func describeLimits(l spec.Limits) string {
	limit := func(v int64, format func(int64) string) string {
		if v == 0 {
			return "unlimited"
		}
		return format(v)
	}
	cpus := "unlimited CPU"
	if l.CPUs > 0 {
		cpus = fmt.Sprintf("%g CPU", l.CPUs)
	}
	return fmt.Sprintf("%s memory, %s, %s processes, %s disk", limit(l.MemoryBytes, spec.FormatSize), cpus,
		limit(l.Pids, func(n int64) string { return fmt.Sprint(n) }), limit(l.DiskBytes, spec.FormatSize))
}

func describeNetwork(n spec.NetworkPolicy) string {
	if n.Mode != spec.NetProxy {
		return "none"
	}
	if len(n.Allow) == 0 {
		return "through the egress proxy, no host allowed yet"
	}
	return "only " + strings.Join(n.Allow, ", ")
}

// tracker remembers the sessions one client created, so that they can be
// deleted when it disconnects rather than linger until their idle timeout.
type tracker struct {
	mu     sync.Mutex
	owners map[string]string // session id → owner
	closed bool
}

func newTracker() *tracker { return &tracker{owners: map[string]string{}} }

// add records a new session; false once the client is gone.
func (t *tracker) add(owner, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.owners[id] = owner
	return true
}

func (t *tracker) remove(id string) {
	t.mu.Lock()
	delete(t.owners, id)
	t.mu.Unlock()
}

// close returns every recorded session and refuses new ones.
func (t *tracker) close() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	owners := t.owners
	t.owners = map[string]string{}
	return owners
}
