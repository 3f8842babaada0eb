package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// apiVersion is the Engine API version Warden speaks: Docker 20.10's,
// which every engine since understands.
const apiVersion = "v1.41"

// engineAPI is what the backend asks of a Docker engine: *Engine on a
// host, an in-process fake in the unit tests, which check the backend's
// requests and its cleanup on every failure without a daemon.
type engineAPI interface {
	Ping(ctx context.Context) error
	Create(ctx context.Context, name string, c ContainerConfig) (string, error)
	Start(ctx context.Context, id string) error
	Kill(ctx context.Context, id string) error
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	Wait(ctx context.Context, id string) (int, error)
	Pid(ctx context.Context, id string) (int, error)
	List(ctx context.Context, label string) ([]Container, error)
	ImageVolumes(ctx context.Context, ref string) ([]string, error)
	HasImage(ctx context.Context, ref string) (bool, error)
	Import(ctx context.Context, repo, tag string, tarball io.Reader, changes ...string) error
	Load(ctx context.Context, archive io.Reader) error
	Logs(ctx context.Context, id string) (string, error)
}

// Engine is a client of one Docker Engine.
type Engine struct {
	hc   *http.Client
	base string
}

// NewEngine connects to DOCKER_HOST, or to the default socket. Nothing is
// dialled until the first call.
func NewEngine() (*Engine, error) {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("DOCKER_HOST %q: %w", host, err)
	}
	tr := &http.Transport{MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}
	e := &Engine{hc: &http.Client{Transport: tr}}
	switch u.Scheme {
	case "unix":
		path := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		e.base = "http://docker/" + apiVersion
	default:
		// A remote engine would resolve the box's bind paths on its own
		// host, and plain tcp:// is an unauthenticated root API.
		return nil, fmt.Errorf("DOCKER_HOST %q: the docker backend needs the engine of this host, on a unix:// socket", host)
	}
	return e, nil
}

// ErrNoEngine says no engine answers on the socket (none there, or a
// stale one a stopped engine left): RemoveTemplateImages had nothing to
// check, which is no failure of the caller's gc.
var ErrNoEngine = errors.New("no docker engine answers")

// APIError is an answer of the engine other than success.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("docker: %s (HTTP %d)", e.Message, e.Status) }

// IsNotFound says err is the engine's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// maxAnswer bounds what Warden reads of one answer.
const maxAnswer = 8 << 20

// call sends one request; a body of type io.Reader goes as it is, any
// other as JSON. out, when not nil, receives the JSON answer.
func (e *Engine) call(ctx context.Context, method, path string, q url.Values, body any, out any) error {
	var r io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r, ctype = b, "application/x-tar"
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return err
		}
		r = bytes.NewReader(buf)
	}
	u := e.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return err
	}
	if r != nil {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return fmt.Errorf("docker: %w (is dockerd running? DOCKER_HOST=%s)", err, os.Getenv("DOCKER_HOST"))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("docker: reading the answer to %s %s: %w", method, path, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("docker: the answer to %s %s is longer than %d MiB", method, path, maxAnswer>>20)
	}
	if resp.StatusCode >= 300 {
		var m struct{ Message string }
		if json.Unmarshal(data, &m) != nil || m.Message == "" {
			m.Message = strings.TrimSpace(string(data))
		}
		return &APIError{Status: resp.StatusCode, Message: m.Message}
	}
	if raw, ok := out.(*rawBody); ok {
		*raw = data
		return nil
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Ping checks the engine answers.
func (e *Engine) Ping(ctx context.Context) error {
	return e.call(ctx, http.MethodGet, "/_ping", nil, nil, nil)
}
