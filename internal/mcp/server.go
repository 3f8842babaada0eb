// Package mcp serves Warden's sandboxes as tools over the Model Context
// Protocol, so any MCP client (Claude Desktop and Code, Cursor, agent
// frameworks) can run untrusted code with one line of configuration. The
// same tools are served over stdio by `warden mcp`, with sandboxes run in
// that process, and over Streamable HTTP at /mcp on `warden serve`, behind
// its API keys.
package mcp

import (
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Options say whom sandboxes belong to and whether they may have network
// (none by default). Limits, ceilings and caps are the Manager's.
type Options struct {
	// Owner owns the sessions of a client the transport does not
	// authenticate: the one fixed owner of a stdio server, or the single
	// tenant of an HTTP server without keys. An authenticated HTTP
	// request's own tenant always wins.
	Owner string
	// AllowNetwork lets create_session ask for the egress proxy with an
	// allowlist. Without it every sandbox has no network at all.
	AllowNetwork bool
	// Version is the server version reported to clients.
	Version string
	// Logger receives the SDK's and the tools' logs (default: none). A
	// stdio server must not log to stdout, which carries the protocol.
	Logger *slog.Logger
	// Templates, when set, is the template store create_session's
	// template names (the Manager's Config.Templates), listed by
	// list_templates after "host"; without it only "host" is offered.
	Templates sandbox.Templates
}

func (o Options) withDefaults() Options {
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// instructions tell the model what the server is for and how the tools
// fit together; clients show them to the model once per connection.
const instructions = `Warden runs code in isolated Linux sandboxes (no network unless a session asks for an allowlist, bounded memory, CPU, processes, disk and time).
For a quick, stateless computation call run_code or run_command without a session_id.
For multi-step work (variables, files, installed packages that must persist) call create_session once, pass its session_id to every later call, and close_session when done.
Files live in /workspace inside the sandbox; use write_file, read_file and list_files to move them. Charts drawn with matplotlib come back as images.`

// New builds the MCP server with Warden's tools over m. Sessions its
// clients create are left to the Manager's TTL and idle timeout; Run also
// deletes them when the client disconnects.
func New(m sandbox.Sessions, opts Options) *sdk.Server {
	return newServer(m, opts, nil)
}

func newServer(m sandbox.Sessions, opts Options, created *tracker) *sdk.Server {
	opts = opts.withDefaults()
	srv := sdk.NewServer(&sdk.Implementation{Name: "warden", Title: "Warden sandbox", Version: opts.Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: opts.Logger, Capabilities: &sdk.ServerCapabilities{}})
	t := &tools{m: m, opts: opts, created: created, limits: m.DefaultLimits()}
	t.register(srv)
	srv.AddReceivingMiddleware(argumentErrors)
	return srv
}
