//go:build !slim

package main

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/e2b"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
)

// TestDescriptorReserve: the reserve warden serve keeps per sandbox counts
// the session (its named interpreters and egress proxy included), its
// transfers and what E2B's API may hold for it: 745 with today's caps,
// where the E2B API's 64 commands and 32 contexts (about 450 descriptors)
// were left out of the old 233.
func TestDescriptorReserve(t *testing.T) {
	want := 24 + sandbox.MaxNamedInterpreters*sandbox.DescriptorsPerInterpreter + egress.ServerDescriptors +
		server.TransferDescriptors + e2b.DescriptorsPerSandbox
	if descriptorsPerSandbox != want {
		t.Errorf("descriptors kept per sandbox = %d, want %d", descriptorsPerSandbox, want)
	}
	if descriptorsPerSandbox != 745 {
		t.Errorf("descriptors kept per sandbox = %d, want 745 with today's caps (update the README and this test if the caps changed)", descriptorsPerSandbox)
	}
}

// TestDescriptorReserveStream: a stream session may hold a descriptor
// per channel each end has open besides (64), so serve reserves them:
// for gVisor's sessions by default (the flag's "", which
// descriptorsReserved resolves per backend itself), and for any backend
// asked to take the stream.
func TestDescriptorReserveStream(t *testing.T) {
	for _, tc := range []struct {
		backend   string
		transport native.AgentTransport
		want      int
	}{
		{"native", "", 745},
		{"native", native.TransportFD, 745},
		{"native", native.TransportStream, 745 + 64},
		{"gvisor", "", 745 + 64},
		{"gvisor", native.TransportFD, 745},
		{"gvisor", native.TransportStream, 745 + 64},
		{"docker", "", 745},
	} {
		if got := descriptorsReserved(tc.backend, tc.transport); got != tc.want {
			t.Errorf("descriptorsReserved(%s, %q) = %d, want %d", tc.backend, tc.transport, got, tc.want)
		}
	}
}
