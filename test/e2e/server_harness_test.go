package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// apiServer is one `warden serve` under test, on a free loopback port.
type apiServer struct {
	url string
	pid int
	// stop ends the server (SIGTERM, then SIGKILL after 20s) and waits.
	stop func()
	// exit reports, once stop returned, what the server wrote on stderr
	// and its exit error.
	exit func() (string, error)
}

// Test keys: each is its own tenant; keyOperator is the operator's
// metrics key, which reads the whole server's /metrics and nothing else.
const (
	keyA        = "test-key-a-0123456789abcdef"
	keyB        = "test-key-b-0123456789abcdef"
	keyOperator = "test-key-operator-0123456789abcdef"
)

// startServer runs `warden serve` with the test keys and extra flags, and
// stops it (SIGTERM, then waits) when the test ends. Without a
// --state-dir flag it gets its own, removed after it stops.
func startServer(t *testing.T, flags ...string) *apiServer {
	t.Helper()
	return startServerAs(t, nil, flags...)
}

// startServerAs is startServer under a prefix command (prlimit, to
// start it with lower hard rlimits).
func startServerAs(t *testing.T, prefix []string, flags ...string) *apiServer {
	t.Helper()
	return startServerBin(t, prefix, wardenBin, flags...)
}

// startServerBin is startServerAs with another warden binary (with its
// own warden-init beside it).
func startServerBin(t *testing.T, prefix []string, bin string, flags ...string) *apiServer {
	t.Helper()
	requireSandbox(t)
	if !slices.Contains(flags, "--state-dir") {
		flags = append(flags, "--state-dir", filepath.Join(t.TempDir(), "state"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	argv := append(append(append([]string{}, prefix...), bin, "serve", "--listen", "127.0.0.1:0"), flags...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"WARDEN_API_KEYS=" + keyA + "," + keyB, "WARDEN_METRICS_KEYS=" + keyOperator, "PATH=/usr/local/bin:/usr/bin:/bin"}
	for _, k := range []string{"WARDEN_EGRESS_HOSTS", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting warden serve: %v", err)
	}
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cancel()
				<-done
			}
			cancel()
		})
	}
	t.Cleanup(stop)
	lines := bufio.NewScanner(stderr)
	addr := make(chan string, 1)
	var logs strings.Builder
	var waitErr error
	go func() {
		defer close(done)
		for lines.Scan() {
			line := lines.Text()
			logs.WriteString(line + "\n")
			if _, rest, ok := strings.Cut(line, "serving on "); ok {
				addr <- strings.Fields(rest)[0]
			}
		}
		waitErr = cmd.Wait()
	}()
	exit := func() (string, error) {
		<-done
		return logs.String(), waitErr
	}
	select {
	case u := <-addr:
		return &apiServer{url: u, pid: cmd.Process.Pid, stop: stop, exit: exit}
	case <-done:
		t.Fatal("warden serve exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("warden serve did not say where it listens within 30s")
	}
	return nil
}

// call sends one request as key and returns the status and body.
func (s *apiServer) call(t *testing.T, key, method, path string, body io.Reader, contentType string) (int, []byte) {
	t.Helper()
	return s.callWith(t, http.DefaultClient, key, method, path, body, contentType)
}

// callWith is call through client.
func (s *apiServer) callWith(t *testing.T, client *http.Client, key, method, path string, body io.Reader, contentType string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// jsonCall sends v as JSON and decodes a 2xx answer into out (if not nil);
// a status other than want fails the test.
func (s *apiServer) jsonCall(t *testing.T, key, method, path string, v any, want int, out any) {
	t.Helper()
	code, b := s.call(t, key, method, path, jsonBody(t, v), "application/json")
	if code != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: answer %s: %v", method, path, b, err)
		}
	}
}

// jsonBody is v as a JSON request body, or nil for a nil v.
func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// session is the part of the Session object the tests read.
type session struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

func (s *apiServer) newSession(t *testing.T, key string, body map[string]any) string {
	t.Helper()
	var ses session
	if body == nil {
		body = map[string]any{}
	}
	s.jsonCall(t, key, "POST", "/v1/sessions", body, http.StatusCreated, &ses)
	if !strings.HasPrefix(ses.ID, "ses_") || ses.State != "ready" {
		t.Fatalf("new session = %+v, want a ses_ id in state ready", ses)
	}
	return ses.ID
}

// code runs code in a session's interpreter.
func (s *apiServer) code(t *testing.T, key, id, language, code string, extra map[string]any) spec.Result {
	t.Helper()
	body := map[string]any{"language": language, "code": code}
	for k, v := range extra {
		body[k] = v
	}
	var r spec.Result
	s.jsonCall(t, key, "POST", "/v1/sessions/"+id+"/exec", body, http.StatusOK, &r)
	return r
}

// healthy fails the test unless /healthz answers 200.
func (s *apiServer) healthy(t *testing.T) {
	t.Helper()
	if code, b := s.call(t, "", "GET", "/healthz", nil, ""); code != http.StatusOK {
		t.Fatalf("GET /healthz = %d %s, want 200", code, b)
	}
}

func sessionPath(id string, rest ...string) string {
	return fmt.Sprintf("/v1/sessions/%s%s", id, strings.Join(rest, ""))
}
