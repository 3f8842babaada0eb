package kubebed_test

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

// Environment of a Pod's stand-in: the test binary, started by the
// simulated kubelet with stubAddrEnv set, serves stubPod's name on
// stubAddrEnv's address instead of running tests.
const (
	stubAddrEnv = "WARDEN_KUBEBED_STUB_ADDR"
	stubPodEnv  = "WARDEN_KUBEBED_STUB_POD"
	// stubExitPath makes a stand-in exit at once with stubExitCode, as a
	// Pod's process that dies.
	stubExitPath = "/exit"
	stubExitCode = 3
	// stubLife bounds a stand-in's life should its kubelet never stop it.
	stubLife = 10 * time.Minute
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

// stubCommand is the kubelet's PodCommand for the tests: this binary as
// a stub server on the Pod's address.
func stubCommand(pod *corev1.Pod, addr netip.AddrPort) (string, []string, []string) {
	return os.Args[0], nil, []string{stubAddrEnv + "=" + addr.String(), stubPodEnv + "=" + pod.Name}
}

// serveStub answers every request on addr with pod's name until SIGTERM
// or stubLife, or exits on a request for stubExitPath.
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
