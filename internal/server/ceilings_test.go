package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// noBoxes is a backend that builds nothing: a request the Manager
// refuses never reaches it, and one it lets through fails loudly.
type noBoxes struct{}

var errNoBoxes = errors.New("this test builds no sandboxes")

func (noBoxes) Name() string { return "none" }
func (noBoxes) Start(context.Context, spec.Spec) (sandbox.Box, error) {
	return nil, errNoBoxes
}
func (noBoxes) Run(context.Context, spec.Spec, io.Reader, sandbox.Stream) (spec.Result, error) {
	return spec.Result{}, errNoBoxes
}

// TestCeilingsAnswer400: a request above an operator's ceiling, through
// the real Manager, is a 400 whose message names the limit, the value,
// the ceiling and the flag, before any sandbox is built.
func TestCeilingsAnswer400(t *testing.T) {
	mgr := sandbox.NewManager(noBoxes{}, sandbox.Config{Owners: 2, MaxTTL: sandbox.DefaultMaxTTL, MaxIdle: sandbox.DefaultMaxIdle, Ceilings: spec.Ceilings{
		Timeout: 10 * time.Minute, MemoryBytes: 6 * spec.GiB, DiskBytes: 6 * spec.GiB, CPUs: 2, Pids: 4096, OpenFiles: 65536,
	}})
	t.Cleanup(func() { mgr.Close() })
	srv, err := New(mgr, Config{Keys: []string{keyA, keyB}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv}
	tests := []struct{ target, body, want string }{
		{"/v1/sessions", `{"limits":{"memory_bytes":68719476736}}`,
			"memory 64GiB is above this server's ceiling of 6GiB (set by --max-memory): ask for at most 6GiB"},
		{"/v1/sessions", `{"limits":{"disk_bytes":68719476736}}`,
			"disk 64GiB is above this server's ceiling of 6GiB (set by --max-disk): ask for at most 6GiB"},
		{"/v1/sessions", `{"limits":{"cpus":1024}}`,
			"cpus 1024 is above this server's ceiling of 2 (set by --max-cpus): ask for at most 2"},
		{"/v1/sessions", `{"limits":{"timeout_seconds":86400}}`,
			"timeout 24h0m0s is above this server's ceiling of 10m0s (set by --max-timeout): ask for at most 10m0s"},
		{"/v1/sessions", `{"ttl_seconds":86400}`,
			"ttl 24h0m0s is out of range: use up to 6h0m0s, this server's ceiling (set by --max-ttl)"},
		{"/v1/sessions", `{"idle_timeout_seconds":86400}`,
			"idle timeout 24h0m0s is out of range: use up to 1h0m0s, this server's ceiling (set by --max-idle-timeout)"},
		{"/v1/run", `{"command":["true"],"limits":{"pids":1048576}}`,
			"pids 1048576 is above this server's ceiling of 4096 (set by --max-pids): ask for at most 4096"},
		{"/v1/run", `{"command":["true"],"limits":{"open_files":1048576}}`,
			"open files 1048576 is above this server's ceiling of 65536 (set by --max-open-files): ask for at most 65536"},
	}
	for _, tt := range tests {
		resp := h.do("POST", tt.target, keyA, tt.body)
		code, msg := resp.errorMessage()
		if resp.status != http.StatusBadRequest || code != codeBadRequest || msg != tt.want {
			t.Errorf("POST %s %s: got %d %s %q, want 400 %s %q", tt.target, tt.body, resp.status, code, msg, codeBadRequest, tt.want)
		}
	}
}

// TestCeilingsBelowDefaults: ceilings below the built-in defaults lower
// what a request leaving limits out gets, so such a request is served
// (here: reaches the backend) instead of answered 400, on /v1/sessions and
// /v1/run alike, and the session is built with the lowered limits.
func TestCeilingsBelowDefaults(t *testing.T) {
	mgr := sandbox.NewManager(noBoxes{}, sandbox.Config{Ceilings: spec.Ceilings{
		Timeout: 30 * time.Second, MemoryBytes: 256 * spec.MiB, CPUs: 0.5, OpenFiles: 512,
	}})
	t.Cleanup(func() { mgr.Close() })
	srv, err := New(mgr, Config{AllowAnonymous: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv}
	for _, tt := range []struct{ target, body string }{
		{"/v1/sessions", `{}`},
		{"/v1/run", `{"command":["true"]}`},
	} {
		resp := h.do("POST", tt.target, "", tt.body)
		if _, msg := resp.errorMessage(); resp.status != http.StatusInternalServerError || msg != errNoBoxes.Error() {
			t.Errorf("POST %s %s: got %d %q, want the request to reach the backend (500 %q)", tt.target, tt.body, resp.status, msg, errNoBoxes)
		}
	}
	want := spec.DefaultLimits
	want.Timeout, want.MemoryBytes, want.CPUs, want.OpenFiles = 30*time.Second, 256*spec.MiB, 0.5, 512
	if got := mgr.DefaultLimits(); got != want {
		t.Errorf("DefaultLimits() = %+v, want %+v", got, want)
	}
}
