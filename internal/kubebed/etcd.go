package kubebed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// startWait bounds each program's start: etcd answering its health
// check, the API server /readyz, the CRDs established, the controller up.
// Generous: the machines that run the suite are shared and loaded.
const startWait = 90 * time.Second

// freePort finds a loopback port free now, for a program that takes its
// port on the command line. Another process may take it before the
// program binds it; the program then fails to start and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("releasing loopback port %d: %w", port, err)
	}
	return port, nil
}

// startEtcd runs etcd on loopback with its data under dir and returns it
// and its client URL once it reports itself healthy.
func startEtcd(ctx context.Context, dir, etcd string) (*process, string, error) {
	client, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peer, err := freePort()
	if err != nil {
		return nil, "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	p, err := startProcess(dir, "etcd", etcd, []string{
		"--name=kubebed", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kubebed=" + peerURL,
	}, nil)
	if err != nil {
		return nil, "", err
	}
	healthy := func() bool { return httpOK(ctx, http.DefaultClient, clientURL+"/health", "") }
	if err := waitStarted(ctx, p, "etcd to report healthy", healthy); err != nil {
		return p, "", err
	}
	return p, clientURL, nil
}

// httpOK reports whether a GET of url (with a bearer token if given)
// answers 200 within a second.
func httpOK(ctx context.Context, c *http.Client, url, token string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitStarted polls ready every 100 ms for at most startWait, failing
// early, with the end of p's log, if p exits.
func waitStarted(ctx context.Context, p *process, what string, ready func() bool) error {
	deadline := time.Now().Add(startWait)
	for time.Now().Before(deadline) {
		if ready() {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("waiting for %s: %w; its log ends:\n%s", what, p.exitError(), p.tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("gave up waiting %v for %s; its log ends:\n%s", startWait, what, p.tail())
}
