package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestNewBackendNames: "" is the default backend, and an unknown name is
// refused in one line naming every registered backend.
func TestNewBackendNames(t *testing.T) {
	b, err := NewBackend("", BackendOptions{})
	if err != nil || b.Name() != DefaultBackend {
		t.Errorf("NewBackend(\"\") = %v, %v; want the %s backend", b, err, DefaultBackend)
	}
	_, err = NewBackend("kata", BackendOptions{})
	if !errors.Is(err, spec.ErrInvalid) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("NewBackend(kata) error = %v, want one line wrapping ErrInvalid", err)
	}
	for _, name := range BackendNames() {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NewBackend(kata) error %q does not name %q", err, name)
		}
	}
	if got, want := BackendChoices(), spec.OrList(BackendNames()); got != want {
		t.Errorf("BackendChoices() = %q, want %q", got, want)
	}
}

// TestBackendNamesFromTable: every backend's Name is its name in the
// table, made without starting anything (the factories only fill structs).
func TestBackendNamesFromTable(t *testing.T) {
	// The server makes the kubernetes backend; here a stand-in, named as
	// the table asks.
	opts := BackendOptions{Kubernetes: func(name string) (Backend, error) { return namedBackend{name: name}, nil }}
	for _, e := range backends {
		b, err := e.make(e.name, opts)
		if errors.Is(err, errors.ErrUnsupported) {
			continue // a Linux-only backend elsewhere
		}
		if err != nil || b.Name() != e.name {
			t.Errorf("backend %q made a backend named %v (%v), want %q", e.name, b, err, e.name)
		}
	}
}

// TestNativeExecutorOption: BackendOptions.Executor reaches the native
// backend, whose Run hands it to native.Runtime (sessions ignore it).
func TestNativeExecutorOption(t *testing.T) {
	for _, e := range []native.Executor{"", native.ExecutorAuto, native.ExecutorGo, native.ExecutorFast} {
		b, err := NewBackend(DefaultBackend, BackendOptions{Executor: e})
		if err != nil {
			t.Fatalf("NewBackend(--executor %q): %v", e, err)
		}
		if n, ok := b.(Native); !ok || n.Executor != e {
			t.Errorf("NewBackend(--executor %q) = %#v, want a Native with Executor %q", e, b, e)
		}
	}
}

// TestAgentTransportOption: only native and gvisor take the stream
// transport; any other backend given it fails rather than ignore it, and
// an unknown one is refused.
func TestAgentTransportOption(t *testing.T) {
	for _, tc := range []struct {
		backend   string
		transport native.AgentTransport
		want      string
	}{
		{DefaultBackend, native.TransportStream, ""},
		{DefaultBackend, native.TransportFD, ""},
		{"gvisor", native.TransportFD, ""},
		{"gvisor", native.TransportStream, ""},
		{"docker", native.TransportStream, `agent transport "stream": only backends native or gvisor have a choice`},
		{DefaultBackend, "bogus", `agent transport "bogus": want fd or stream`},
	} {
		_, err := NewBackend(tc.backend, BackendOptions{AgentTransport: tc.transport})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("NewBackend(%q, %q) = %v, want a backend", tc.backend, tc.transport, err)
		case tc.want != "" && (!errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("NewBackend(%q, %q) = %v, want ErrInvalid saying %q", tc.backend, tc.transport, err, tc.want)
		}
	}
}

// TestSessionTransport: each backend with the choice has its own default
// (descriptors on native, the stream on gvisor), an asked-for transport
// wins, and a backend without the choice counts as descriptors.
func TestSessionTransport(t *testing.T) {
	for _, tc := range []struct {
		backend   string
		transport native.AgentTransport
		want      native.AgentTransport
	}{
		{"", "", native.TransportFD},
		{DefaultBackend, "", native.TransportFD},
		{DefaultBackend, native.TransportStream, native.TransportStream},
		{"gvisor", "", native.TransportStream},
		{"gvisor", native.TransportFD, native.TransportFD},
		{"docker", "", native.TransportFD},
		{"microvm", "", native.TransportFD},
	} {
		if got := SessionTransport(tc.backend, tc.transport); got != tc.want {
			t.Errorf("SessionTransport(%q, %q) = %q, want %q", tc.backend, tc.transport, got, tc.want)
		}
	}
	if got, want := TransportDefaults(), "fd on native, stream on gvisor"; got != want {
		t.Errorf("TransportDefaults() = %q, want %q", got, want)
	}
}

// namedBackend is a Backend that is only a name, for the registry's tests.
type namedBackend struct {
	Backend
	name string
}

func (b namedBackend) Name() string { return b.name }

// TestKubernetesNeedsServe: without the server's maker (warden run, mcp)
// the kubernetes backend is refused in one line saying where it runs.
func TestKubernetesNeedsServe(t *testing.T) {
	_, err := NewBackend("kubernetes", BackendOptions{})
	if err == nil || !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "warden serve --backend kubernetes") || strings.Contains(err.Error(), "\n") {
		t.Errorf("NewBackend(kubernetes) without a maker: got %v, want one ErrInvalid line naming warden serve --backend kubernetes", err)
	}
}

// TestSnapshotCompressionOption: NewBackend refuses an unknown snapshot
// compression, and fast where no memory image is written for it
// (off gvisor, or gvisor over descriptors), rather than ignore it.
func TestSnapshotCompressionOption(t *testing.T) {
	for _, tc := range []struct {
		backend   string
		transport native.AgentTransport
		c         gvisor.Compression
		want      string
	}{
		{DefaultBackend, "", "", ""},
		{DefaultBackend, "", gvisor.CompressionNone, ""},
		{DefaultBackend, "", "zstd", `snapshot compression "zstd": want none or fast`},
		{DefaultBackend, "", gvisor.CompressionFast, "snapshot compression fast: only --backend gvisor writes memory snapshots"},
		{"docker", "", gvisor.CompressionFast, "only --backend gvisor writes memory snapshots"},
		{"gvisor", native.TransportFD, gvisor.CompressionFast, "--backend gvisor over --agent-transport fd writes no memory snapshot"},
	} {
		_, err := NewBackend(tc.backend, BackendOptions{AgentTransport: tc.transport, SnapshotCompression: tc.c})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("NewBackend(%q, %q, %q) = %v, want a backend", tc.backend, tc.transport, tc.c, err)
		case tc.want != "" && (!errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("NewBackend(%q, %q, %q) = %v, want ErrInvalid saying %q", tc.backend, tc.transport, tc.c, err, tc.want)
		}
	}
}
