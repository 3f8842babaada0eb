// Package wardenserve runs a `warden serve` on a free loopback port for a
// benchmark, with a state directory of its own, and talks to it as one or
// more API keys; Stop ends it and everything it started within bounded
// waits.
package wardenserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
)

// Options say which server to start.
type Options struct {
	Warden  string
	Backend string
	// Keys become WARDEN_API_KEYS; none means a server open to anyone on
	// loopback.
	Keys []string
	// Args are more flags of `warden serve`.
	Args []string
	// Stderr gets the server's log (discarded when nil).
	Stderr io.Writer
	// StateDir is the server's --state-dir, kept at Stop (a benchmark's
	// template store lives there); empty means a temporary one, removed
	// at Stop.
	StateDir string
}

// Server is one running `warden serve`.
type Server struct {
	Base  string
	Addr  string
	Cmd   *exec.Cmd
	State string
	keep  bool // State is the caller's: Stop leaves it
	done  chan struct{}
}

// startWait bounds how long a new server may take to answer /healthz.
const startWait = 20 * time.Second

// Start starts a server on a free loopback port and waits until it
// answers.
func Start(o Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, fmt.Errorf("freeing port %s: %w", addr, err)
	}
	state := o.StateDir
	if state == "" {
		if state, err = os.MkdirTemp("", "bench-state-"); err != nil {
			return nil, fmt.Errorf("making a state directory: %w", err)
		}
	}
	if o.Backend == "" {
		o.Backend = "native"
	}
	args := append([]string{"serve", "--backend", o.Backend, "--listen", addr, "--state-dir", state}, o.Args...)
	cmd := exec.Command(o.Warden, args...)
	cmd.Env = os.Environ()
	if len(o.Keys) > 0 {
		cmd.Env = append(cmd.Env, "WARDEN_API_KEYS="+strings.Join(o.Keys, ","))
	}
	cmd.Stderr = o.Stderr
	// A group of its own, so Stop can end whatever the server leaves.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		if o.StateDir == "" {
			removeState(state)
		}
		return nil, fmt.Errorf("starting %s: %w", o.Warden, err)
	}
	s := &Server{Base: "http://" + addr, Addr: addr, Cmd: cmd, State: state, keep: o.StateDir != "", done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }() // only its end matters here, which s.done tells
	for deadline := time.Now().Add(startWait); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		select {
		case <-s.done:
			s.Stop()
			return nil, fmt.Errorf("warden %s exited before answering", strings.Join(args, " "))
		default:
		}
		if resp, err := http.Get(s.Base + "/healthz"); err == nil {
			resp.Body.Close()
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("warden serve --backend %s did not answer within %s", o.Backend, startWait)
}

// stopWait bounds a graceful stop before the server's group is killed.
const stopWait = 60 * time.Second

// Stop interrupts the server, kills its process group if it has not
// exited within stopWait, and removes its state directory (unmounting
// workspaces a killed server left behind) unless it is the caller's
// Options.StateDir.
func (s *Server) Stop() {
	if err := s.Cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		log.Printf("interrupting warden serve (pid %d): %v", s.Cmd.Process.Pid, err)
	}
	select {
	case <-s.done:
	case <-time.After(stopWait):
		log.Printf("warden serve (pid %d) did not stop within %s: killing its group", s.Cmd.Process.Pid, stopWait)
		if err := syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGKILL); err != nil {
			log.Printf("killing warden serve's group %d: %v", s.Cmd.Process.Pid, err)
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			log.Printf("warden serve (pid %d) survived SIGKILL for 10 s", s.Cmd.Process.Pid)
		}
	}
	// Anything left in the group (nothing, when the server stopped in
	// time) is the server's and goes with it.
	if err := syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGKILL); err == nil {
		log.Printf("killed what warden serve (pid %d) left in its group", s.Cmd.Process.Pid)
	} else if !errors.Is(err, syscall.ESRCH) {
		log.Printf("killing warden serve's group %d: %v", s.Cmd.Process.Pid, err)
	}
	if !s.keep {
		removeState(s.State)
	}
}

// removeState unmounts what a killed server left in state and removes it.
func removeState(state string) {
	if err := unmountUnder(state); err != nil {
		log.Printf("unmounting leftovers under %s: %v", state, err)
	}
	if err := os.RemoveAll(state); err != nil {
		log.Printf("removing %s: %v", state, err)
	}
}

// Client is one API key's view of the server.
type Client struct {
	Base string
	Key  string
	HTTP *http.Client
}

// Client returns a client for key ("" for none) with connections of its
// own and a bound on each request.
func (s *Server) Client(key string, timeout time.Duration) *Client {
	return &Client{Base: s.Base, Key: key, HTTP: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// APIError is an answer other than 2xx.
type APIError struct {
	Status  int
	Message string
	// RetryAfter is the answer's Retry-After in seconds (0: none).
	RetryAfter int
}

func (e *APIError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

// Do sends body (JSON, or none when nil) with method to path and decodes
// a 2xx answer into out; any other answer is an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.Open(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // drained only so the connection is reused
	return nil
}

// Open sends body (JSON, or none when nil) with method to path and
// returns a 2xx answer unread, for the caller to read (a stream) and
// close; any other answer is an *APIError.
func (c *Client) Open(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e struct{ Error struct{ Message string } }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e) // a body not JSON leaves the message empty; the status is reported
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, &APIError{Status: resp.StatusCode, Message: e.Error.Message, RetryAfter: retry}
	}
	return resp, nil
}

// Post sends body as JSON to path and decodes the answer into out.
func (c *Client) Post(path string, body, out any) error {
	return c.Do(context.Background(), http.MethodPost, path, body, out)
}

// Create makes a session with the given options (nil: the defaults).
func (c *Client) Create(opts map[string]any) (string, error) {
	if opts == nil {
		opts = map[string]any{}
	}
	var out struct{ ID string }
	err := c.Post("/v1/sessions", opts, &out)
	return out.ID, err
}

// Remove deletes a session, logging a failure other than "already gone".
func (c *Client) Remove(id string) {
	err := c.Do(context.Background(), http.MethodDelete, "/v1/sessions/"+id, nil, nil)
	var ae *APIError
	if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusNotFound) {
		log.Printf("deleting session %s: %v", id, err)
	}
}

// Result is the part of an exec's or run's Result the benchmarks read.
type Result struct {
	ExitCode  int     `json:"exit_code"`
	Stderr    string  `json:"stderr"`
	Error     string  `json:"error"`
	TimedOut  bool    `json:"timed_out"`
	WallMS    float64 `json:"wall_time_ms"`
	CPUTimeMS float64 `json:"cpu_time_ms"`
	// QueuedMS is how long the exec waited for exec pacing.
	QueuedMS float64 `json:"queued_ms"`
}

// Python runs code in the session and fails on an exception or an error.
func (c *Client) Python(id, code string) error {
	var r Result
	if err := c.Post("/v1/sessions/"+id+"/exec", map[string]any{"language": "python", "code": code}, &r); err != nil {
		return err
	}
	if r.ExitCode != 0 || r.Error != "" {
		return fmt.Errorf("python %q: exit %d: %s%s", code, r.ExitCode, r.Error, measure.Tail([]byte(r.Stderr)))
	}
	return nil
}

// OneShot runs prog through POST /v1/run and returns the request's wall
// time in ms, failing on anything but exit 0.
func (c *Client) OneShot(prog []string) (float64, error) {
	var r Result
	start := time.Now()
	if err := c.Post("/v1/run", map[string]any{"command": prog}, &r); err != nil {
		return 0, err
	}
	d := measure.MS(time.Since(start))
	if r.ExitCode != 0 || r.Error != "" {
		return 0, fmt.Errorf("%s: exit %d: %s%s", strings.Join(prog, " "), r.ExitCode, r.Error, measure.Tail([]byte(r.Stderr)))
	}
	return d, nil
}
