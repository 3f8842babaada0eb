package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSessionsSurviveDescriptorExhaustion holds `warden serve` at its
// RLIMIT_NOFILE with idle connections (a slow-loris, on loopback), churns
// them, and meanwhile runs execs in a session and creates sessions, which
// ask the spawner for inits and namespaces whose descriptors the server
// may then fail to receive. Requests may fail (503: retry); the session
// must never die, and must serve normally once the flood is over.
func TestSessionsSurviveDescriptorExhaustion(t *testing.T) {
	srv := startServer(t)
	// One kept-alive connection carries every request: a new one would
	// wait in the backlog with the flood.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: 5 * time.Minute}}
	do := func(method, path string, v any) (int, []byte) {
		t.Helper()
		return srv.callWith(t, client, keyA, method, path, jsonBody(t, v), "application/json")
	}
	var ses session
	if code, b := do("POST", "/v1/sessions", map[string]any{}); code != http.StatusCreated || json.Unmarshal(b, &ses) != nil {
		t.Fatalf("creating a session = %d %s", code, b)
	}
	exec := map[string]any{"command": []string{"true"}}
	if code, b := do("POST", sessionPath(ses.ID, "/exec"), exec); code != http.StatusOK {
		t.Fatalf("exec before the flood = %d %s", code, b)
	}

	restore := lowerNoFile(t, srv.pid, 48)
	idle := holdConnections(t, srv.url, 400)
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	statuses := map[string]int{}
	for round := range 20 {
		for i := range 8 {
			idle[i].Close()
			if c, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://")); err == nil {
				idle[i] = c
			}
		}
		idle = append(idle[8:], idle[:8]...)
		code, b := do("POST", sessionPath(ses.ID, "/exec"), exec)
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Errorf("round %d: exec = %d %s, want 200 or 503", round, code, b)
		}
		statuses["exec "+strconv.Itoa(code)]++
		code, b = do("POST", "/v1/sessions", map[string]any{})
		statuses["create "+strconv.Itoa(code)]++
		var other session
		if code == http.StatusCreated && json.Unmarshal(b, &other) == nil {
			do("DELETE", sessionPath(other.ID), nil)
		}
		if code, b := do("GET", sessionPath(ses.ID), nil); code != http.StatusOK || !strings.Contains(string(b), `"state":"ready"`) {
			t.Fatalf("round %d: the session = %d %s, want it ready", round, code, b)
		}
	}
	t.Logf("during the flood (%d connections held): %v", len(idle), statuses)
	for _, c := range idle {
		c.Close()
	}
	idle = nil
	restore()
	if code, b := do("POST", sessionPath(ses.ID, "/exec"), exec); code != http.StatusOK {
		t.Fatalf("exec after the flood = %d %s", code, b)
	}
}

// lowerNoFile sets pid's RLIMIT_NOFILE to spare above the descriptors it
// has open, and returns how to put the old limit back.
func lowerNoFile(t *testing.T, pid, spare int) (restore func()) {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	lowered := unix.Rlimit{Cur: uint64(len(fds) + spare)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatalf("reading the server's RLIMIT_NOFILE: %v", err)
	}
	lowered.Max = old.Max
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lowered, nil); err != nil {
		t.Fatalf("lowering the server's RLIMIT_NOFILE: %v", err)
	}
	restore = func() { _ = unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil) }
	t.Cleanup(restore)
	return restore
}

// holdConnections opens n idle connections to url (bounded), more than a
// lowered limit lets the server accept: the rest wait in its backlog.
func holdConnections(t *testing.T, url string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 5*time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	if len(conns) < 16 {
		t.Fatalf("only %d connections could be opened", len(conns))
	}
	return conns
}
