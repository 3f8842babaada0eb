package mcp

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Run serves one client over t until it disconnects or ctx ends, then
// deletes every session that client created: over stdio a disconnect is
// final, so nobody could use them again.
func Run(ctx context.Context, m sandbox.Sessions, opts Options, t sdk.Transport) error {
	created := newTracker()
	srv := newServer(m, opts, created)
	err := srv.Run(ctx, t)
	log := opts.withDefaults().Logger
	for id, owner := range created.close() {
		if err := m.Delete(context.WithoutCancel(ctx), owner, id); err != nil {
			log.Warn("deleting a session of a disconnected client", "session", id, "error", err)
		}
	}
	return err
}

// ServeStdio serves one client on the process's stdin and stdout, as MCP
// clients expect of a server they start as a command.
func ServeStdio(ctx context.Context, m sandbox.Sessions, opts Options) error {
	return Run(ctx, m, opts, &sdk.StdioTransport{})
}

// httpSessionIdle ends an MCP session over HTTP that has seen no request
// for this long, so abandoned clients do not pile up; the sandboxes'
// own idle timeout and TTL end their sessions.
const httpSessionIdle = 15 * time.Minute

// HTTPHandler serves the tools over Streamable HTTP. It expects to sit
// behind the API's authentication: owner returns the tenant that
// authenticated the request, whose sessions the tools then act on; ""
// means a server without keys, whose sessions belong to opts.Owner.
// An MCP session stays bound to the tenant that opened it, so another
// key cannot use its id. Sessions created over HTTP are not deleted when
// a client goes away (HTTP clients reconnect); their idle timeout and
// TTL end them.
func HTTPHandler(m sandbox.Sessions, opts Options, owner func(context.Context) string) http.Handler {
	srv := New(m, opts)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Logger: opts.withDefaults().Logger, SessionTimeout: httpSessionIdle})
	// The SDK learns the tenant as bearer-token info: it hands it to each
	// tool call and refuses a session id presented by another tenant.
	tenant := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: owner(ctx)}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	serve := func(w http.ResponseWriter, r *http.Request) {
		if owner(r.Context()) == "" {
			h.ServeHTTP(w, r)
			return
		}
		tenant.ServeHTTP(w, r)
	}
	return newSessionCap(owner).wrap(http.HandlerFunc(serve))
}
