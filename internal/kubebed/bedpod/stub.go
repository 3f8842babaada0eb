// Package bedpod holds what stands in for a Pod's process on the test
// bed (internal/kubebed), shared by every package whose tests run a bed:
// a stub HTTP server (the test binary itself), Warden's init in pod mode
// in a native Warden sandbox (Init) or, as the baseline of what that
// sandbox costs, in namespaces of its own (Unboxed), and the small
// helpers their tests use to reach and wait for them. It is for tests
// only.
package bedpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// Environment of a stub: the test binary, started by the bed's kubelet
// with stubAddrEnv set, serves stubPodEnv's Pod name on that address
// instead of running tests.
const (
	stubAddrEnv = "WARDEN_KUBEBED_STUB_ADDR"
	stubPodEnv  = "WARDEN_KUBEBED_STUB_POD"
	// stubLife bounds a stub's life should its kubelet never stop it.
	stubLife = 15 * time.Minute
)

// ExitPath makes a stub exit at once with ExitCode, as a Pod's only
// process that dies; tests check the code the kubelet reports.
const (
	ExitPath = "/exit"
	ExitCode = 3
)

// ServeIfStub is for a test binary's TestMain, before m.Run: in a
// process the kubelet started as a stub it serves and exits, and
// otherwise it returns at once, so the same binary is both the tests
// and the Pods' stand-ins.
func ServeIfStub() {
	addr := os.Getenv(stubAddrEnv)
	if addr == "" {
		return
	}
	if err := serveStub(addr, os.Getenv(stubPodEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Stub is a PodCommand (kubebed.Start's): the running test binary as a
// stub server on the Pod's address. Its TestMain must call ServeIfStub.
func Stub(pod *corev1.Pod, addr netip.AddrPort) kubebed.PodProcess {
	return kubebed.PodProcess{Path: os.Args[0], Env: []string{stubAddrEnv + "=" + addr.String(), stubPodEnv + "=" + pod.Name}}
}

// serveStub answers every request on addr with pod's name until SIGTERM
// or stubLife, or exits on a request for ExitPath.
func serveStub(addr, pod string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("stub: %w", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == ExitPath {
				os.Exit(ExitCode)
			}
			// a test stub: a client that hung up has nothing to learn
			_, _ = w.Write([]byte(pod))
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, stubLife)
	defer cancel()
	go func() {
		<-ctx.Done()
		// Serve returns ErrServerClosed either way; a close error of a stub leaves nothing to act on
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stub: %w", err)
	}
	return nil
}

// Get is the body of a GET of url (a stub's), which must answer 200
// within 10 s.
func Get(ctx context.Context, t testing.TB, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	// the body was read to its end or the test fails already
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

// AskExit asks the stub at base ("http://ip:port") to exit; it does not
// answer, so the request's failure is expected and ignored.
func AskExit(ctx context.Context, base string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+ExitPath, nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		// an answer at all is unexpected; closing its body has no failure worth a test's attention
		_ = resp.Body.Close()
	}
}

// WaitLong bounds each wait on the bed's controller or kubelet: their
// work on a loaded machine can take longer than testhost.WaitFor's 30 s.
const WaitLong = 2 * time.Minute

// WaitFor is testhost.WaitForWithin bounded by WaitLong: it fails t
// naming what it waited for if cond never held; never a timed assertion.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testhost.WaitForWithin(t, WaitLong, what, cond)
}
