package native

import (
	"fmt"
	"slices"

	"github.com/warden-sandbox/warden/internal/spec"
)

// AgentTransport is how the host reaches a session's agent.
type AgentTransport string

// The transports. The zero value is TransportFD.
const (
	// TransportFD passes each process's pipes (and, on cgroup v1, its
	// exec cgroup) to the agent as descriptors over the control socket:
	// the default, and the faster.
	TransportFD AgentTransport = "fd"
	// TransportStream passes no descriptor once the agent serves: the
	// protocol runs over a streammux stream on the control socket, as it
	// must for a box behind a serial port or a TCP connection, so native
	// proves and measures that path (see docs/protocol.md). Execs then get
	// no cgroup of their own: they are killed by process group and their
	// orphans swept, and their figures are rusage's.
	TransportStream AgentTransport = "stream"
)

// AgentTransports lists the transports, for help and errors.
var AgentTransports = []AgentTransport{TransportFD, TransportStream}

// TransportChoices is AgentTransports as help text or an error lists
// them: "fd or stream".
func TransportChoices() string {
	names := make([]string, len(AgentTransports))
	for i, t := range AgentTransports {
		names[i] = string(t)
	}
	return spec.OrList(names)
}

// Validate refuses a transport other than those listed ("" is
// TransportFD).
func (t AgentTransport) Validate() error {
	if t == "" || slices.Contains(AgentTransports, t) {
		return nil
	}
	return fmt.Errorf("agent transport %q: want %s", string(t), TransportChoices())
}
