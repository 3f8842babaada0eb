//go:build !slim

package main

import (
	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// addAgentTransportFlag adds --agent-transport, hidden: it proves and
// measures the agent protocol over one byte stream on native (the path a
// VM or pod backend needs), and is no user feature. Only serve and mcp
// have it: they run sessions, the only sandboxes with an agent.
func addAgentTransportFlag(f *pflag.FlagSet, o *sandbox.BackendOptions) {
	o.AgentTransport = native.TransportFD
	f.StringVar((*string)(&o.AgentTransport), "agent-transport", string(native.TransportFD), "how a --backend "+sandbox.TransportBackends()+" session reaches its agent: "+native.TransportChoices()+" (the stream keeps the host's descriptors out of a gVisor box; see docs/protocol.md)")
	// the flag was just added, so MarkHidden cannot fail
	_ = f.MarkHidden("agent-transport")
}
