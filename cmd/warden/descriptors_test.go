//go:build !slim

package main

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/e2b"
	"github.com/warden-sandbox/warden/internal/egress"
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
