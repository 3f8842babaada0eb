package native_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestListenerStdinRefused: Runtime.Run takes a listener as stdin only
// with --net none and only a listening unix stream socket, above all
// never a TCP socket of the host's network; StartSession refuses one.
// Every refusal comes before a box starts.
func TestListenerStdinRefused(t *testing.T) {
	unixLn := listenerFile(t, "unix", filepath.Join(t.TempDir(), "s"))
	tcpLn := listenerFile(t, "tcp", "127.0.0.1:0")
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	tests := []struct {
		name string
		f    *os.File
		net  spec.NetMode
		want string
	}{
		{"TCP listener", tcpLn, spec.NetNone, "not a unix stream socket"},
		{"file", null, spec.NetNone, "is not a socket"},
		{"unix listener, proxy", unixLn, spec.NetProxy, "needs --net none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec.Spec{Command: []string{"true"}, Limits: spec.DefaultLimits}
			s.Network.Mode = tt.net
			_, err := native.Runtime{ListenerStdin: tt.f}.Run(context.Background(), s, native.IO{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	s := spec.Spec{Limits: spec.DefaultLimits}
	s.Network.Mode = spec.NetNone
	if _, err := (native.Runtime{ListenerStdin: unixLn}).StartSession(context.Background(), s); err == nil || !strings.Contains(err.Error(), "one-shot runs only") {
		t.Errorf("StartSession with a listener: got %v, want a refusal", err)
	}
}

// listenerFile is a copy of a listener on addr, closed at t's end; the
// listener itself is closed at once.
func listenerFile(t *testing.T, network, addr string) *os.File {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.(interface{ File() (*os.File, error) }).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
