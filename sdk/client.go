package sdk

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Client talks to one Warden server. It is safe for concurrent use; create
// one per server and share it.
type Client struct {
	api *ClientWithResponses
}

// Option configures New. It is the generated ClientOption, so the
// generated WithHTTPClient (any *http.Client, e.g. one with a custom
// transport or TLS config) and WithRequestEditorFn work with New as well
// as WithAPIKey does.
type Option = ClientOption

// WithAPIKey sends key as a bearer token on every request; the server
// needs one on every endpoint but /healthz and /openapi.yaml, and sessions
// belong to the key that created them.
func WithAPIKey(key string) Option {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+key)
		return nil
	})
}

// New returns a client for the server at baseURL, such as
// "http://127.0.0.1:8080". It checks the URL up front so a typo fails here
// rather than on the first call. The default HTTP client has no overall
// timeout, because execs may run for hours: bound calls with their context.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("warden: parsing server URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("warden: server URL %q must be http:// or https:// with a host", baseURL)
	}
	api, err := NewClientWithResponses(baseURL, append([]Option{WithRequestEditorFn(dropEmptyQuery)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("warden: creating client: %w", err)
	}
	return &Client{api: api}, nil
}

// dropEmptyQuery removes query parameters with an empty value. The
// generated client sends every optional parameter, set or not, and the
// server rightly refuses an empty path or mode; an empty one means "not
// set" in every helper.
func dropEmptyQuery(_ context.Context, req *http.Request) error {
	q := req.URL.Query()
	changed := false
	for k, vs := range q {
		if len(vs) == 1 && vs[0] == "" {
			q.Del(k)
			changed = true
		}
	}
	if changed {
		req.URL.RawQuery = q.Encode()
	}
	return nil
}

// API returns the generated client, for the endpoints the helpers do not
// wrap (health, metrics, the spec) and for full access to answers.
func (c *Client) API() *ClientWithResponses { return c.api }

// NewSession creates a long-lived sandbox; opts may be nil for the
// server's defaults (no network, default limits). Close the session when
// done: it holds a slot of the server's concurrent-session limit until
// then, or until its TTL or idle timeout ends it.
func (c *Client) NewSession(ctx context.Context, opts *SessionCreate) (*Session, error) {
	if opts == nil {
		opts = &SessionCreate{}
	}
	resp, err := c.api.CreateSession(ctx, *opts)
	info, err := decodeJSON[SessionInfo]("creating session", resp, err, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	return &Session{c: c, id: info.ID}, nil
}

// Session returns a handle on an existing session by id, without a
// request, so a program can pick up a session it created earlier (its
// calls answer not_found if the session has ended).
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// Sessions lists the live sessions of this client's API key.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	resp, err := c.api.ListSessions(ctx)
	list, err := decodeJSON[SessionList]("listing sessions", resp, err, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return list.Sessions, nil
}

// Run runs one command or snippet in a fresh sandbox that is destroyed
// afterwards: the simplest way to run code when nothing needs to persist.
func (c *Client) Run(ctx context.Context, req RunRequest) (*Result, error) {
	resp, err := c.api.RunOnce(ctx, req)
	return decodeJSON[Result]("run", resp, err, http.StatusOK)
}

// Templates lists the root filesystems a session or run may name in its
// Template field: "host" (the server's own, the default) first, then the
// operator's templates, each with the languages it has interpreters for.
// Only the operator adds or removes templates.
func (c *Client) Templates(ctx context.Context) ([]Template, error) {
	resp, err := c.api.ListTemplates(ctx)
	list, err := decodeJSON[TemplateList]("listing templates", resp, err, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return list.Templates, nil
}
