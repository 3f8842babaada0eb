//go:build !slim

package main

import (
	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// addAgentTransportFlag adds --agent-transport. Only serve and mcp have
// it: they run sessions, the only sandboxes with an agent. Its default,
// "", is each backend's own (sandbox.SessionTransport): descriptors on
// native, the faster; the stream on gVisor, whose snapshots then keep
// memory. The trade-offs are in docs/backends.md, not the help.
func addAgentTransportFlag(f *pflag.FlagSet, o *sandbox.BackendOptions) {
	f.StringVar((*string)(&o.AgentTransport), "agent-transport", "", "how a --backend "+sandbox.TransportBackends()+" session reaches its agent: "+native.TransportChoices()+
		" (default: "+sandbox.TransportDefaults()+"; docs/backends.md, \"Checkpoint and restore\")")
}
