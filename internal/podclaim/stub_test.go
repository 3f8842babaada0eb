package podclaim_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Environment of a Pod's stand-in: the test binary, started by the bed's
// kubelet with stubAddrEnv set, serves stubPodEnv's Pod name on that
// address instead of running tests, and exits stubExitCode on a request
// for stubExitPath, as a Pod's only process that dies.
const (
	stubAddrEnv  = "WARDEN_PODCLAIM_STUB_ADDR"
	stubPodEnv   = "WARDEN_PODCLAIM_STUB_POD"
	stubExitPath = "/exit"
	stubExitCode = 3
	// stubLife bounds a stand-in's life should its kubelet never stop it.
	stubLife = 15 * time.Minute
)

// TestMain runs serveStub instead of the tests in a Pod's stand-in.
func TestMain(m *testing.M) {
	if addr := os.Getenv(stubAddrEnv); addr != "" {
		if err := serveStub(addr, os.Getenv(stubPodEnv)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stubCommand is the bed's PodCommand: this binary as a stub server.
func stubCommand(pod *corev1.Pod, addr netip.AddrPort) (string, []string, []string) {
	return os.Args[0], nil, []string{stubAddrEnv + "=" + addr.String(), stubPodEnv + "=" + pod.Name}
}

// serveStub answers every request on addr with pod's name until SIGTERM
// or stubLife.
func serveStub(addr, pod string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("stub: %w", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == stubExitPath {
				os.Exit(stubExitCode)
			}
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
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stub: %w", err)
	}
	return nil
}
