package native_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("listing descriptors: %v", err)
	}
	return len(entries) - 1 // the directory ReadDir itself held open
}

// TestDescriptorsPerSandbox counts the descriptors this process holds
// while a session starts, runs an exec and closes, with and without the
// egress proxy, and checks the peak stays within its part of
// sandbox.DescriptorsPerSandbox, the figure the server's connection cap
// keeps free for each sandbox (the proxy's connections, which this test
// makes none of, are counted from its caps). Samples may miss a short peak, which can
// only make the test lenient, never flaky.
func TestDescriptorsPerSandbox(t *testing.T) {
	testhost.RequireRoot(t)
	for _, mode := range []spec.NetMode{spec.NetNone, spec.NetProxy} {
		t.Run(string(mode), func(t *testing.T) {
			before := openFDs(t)
			var peak atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if n := int64(openFDs(t)); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			runSession(t, mode)
			close(stop)
			wg.Wait()
			used := int(peak.Load()) - before
			// The session's own share of the reserve (it runs no named
			// interpreter), and with the proxy its idle part (no client
			// or upstream connections).
			limit := sandbox.DescriptorsPerSandbox - egress.ServerDescriptors - sandbox.MaxNamedInterpreters*sandbox.DescriptorsPerInterpreter
			if mode == spec.NetProxy {
				limit += egress.ServerDescriptors - 3*egress.DefaultMaxConns
			}
			t.Logf("%s: %d descriptors before, peak %d more, %d reserved", mode, before, used, limit)
			if used > limit {
				t.Errorf("a session held %d descriptors at its peak, more than the %d reserved for it", used, limit)
			}
		})
	}
}

// runSession starts a session in mode, runs an exec in it and closes it.
func runSession(t *testing.T, mode spec.NetMode) {
	t.Helper()
	l := spec.DefaultLimits
	l.Timeout = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := native.Runtime{}.StartSession(ctx, spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: mode}})
	if err != nil {
		t.Fatalf("StartSession(%s) = %v", mode, err)
	}
	defer s.Close()
	r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", "echo a; echo b >&2; sleep 0.2"}}, native.IO{})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("Exec = %+v, %v", r, err)
	}
}
