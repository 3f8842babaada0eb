package sandbox

import (
	"errors"
	"testing"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestGVisorDefaultKeepsMemory: a gvisor backend made with no transport
// named is over the stream, so its boxes are saved whole; asked for
// descriptors, it keeps files only (ErrCannotSave). No box is started.
func TestGVisorDefaultKeepsMemory(t *testing.T) {
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	for _, tc := range []struct {
		transport native.AgentTransport
		wantSaved bool
	}{{"", true}, {native.TransportStream, true}, {native.TransportFD, false}} {
		b, err := NewBackend("gvisor", BackendOptions{AgentTransport: tc.transport})
		if err != nil {
			t.Fatalf("NewBackend(gvisor, %q): %v", tc.transport, err)
		}
		m, ok := b.(MemoryBackend)
		if !ok {
			t.Fatalf("the gvisor backend is no MemoryBackend")
		}
		err = m.SavesMemory(s)
		if got := err == nil; got != tc.wantSaved || (err != nil && !errors.Is(err, ErrCannotSave)) {
			t.Errorf("transport %q: SavesMemory = %v, want saved %v", tc.transport, err, tc.wantSaved)
		}
	}
}

// TestGVisorSnapshotCompression: the gvisor backend's runtime writes
// memory as BackendOptions.SnapshotCompression says (serve's
// --snapshot-compression). No box is started.
func TestGVisorSnapshotCompression(t *testing.T) {
	for _, c := range []gvisor.Compression{"", gvisor.CompressionNone, gvisor.CompressionFast} {
		b, err := NewBackend("gvisor", BackendOptions{SnapshotCompression: c})
		if err != nil {
			t.Fatalf("NewBackend(gvisor, %q): %v", c, err)
		}
		g, ok := b.(gvisorBackend)
		if !ok || g.rt.Compression != c {
			t.Errorf("NewBackend(gvisor, compression %q) = %T, want a gvisor runtime writing %q", c, b, c)
		}
	}
}
