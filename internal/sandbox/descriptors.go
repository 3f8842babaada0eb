package sandbox

import (
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/streammux"
)

// DescriptorsPerSandbox is how many descriptors one session or one-shot
// run may hold in the server process at most, which the server keeps
// free of connections for it (see internal/connlimit): measured, an idle
// session holds 10 (control socket, workspace directory, cgroup files,
// pidfds) and an exec 3 more (its pipes), rounded up to 24 for room; each
// of its named interpreters at most DescriptorsPerInterpreter more; its
// egress proxy at most egress.ServerDescriptors. A front end that holds
// more for a session (E2B's commands and watchers) adds its own count.
const DescriptorsPerSandbox = 24 + MaxNamedInterpreters*DescriptorsPerInterpreter + egress.ServerDescriptors

// DescriptorsPerInterpreter is how many descriptors a running named
// interpreter holds in the server: measured, 32 bash contexts of one E2B
// sandbox added 194 (its pipes, pidfd and the like), about 6 each,
// counted as 7 for room.
const DescriptorsPerInterpreter = 7

// StreamDescriptors is how many more descriptors a session over the
// stream transport (--agent-transport stream) may hold in the server:
// each channel the host opens holds the copy of the pipe end it relays
// (stdio, an interpreter's fds 3 and up), and each the box opens (a
// boxed init's egress connection) a socket to the proxy, and each end
// has at most streammux's MaxChannels open.
func StreamDescriptors() int {
	return 2 * streammux.DefaultConfig().MaxChannels
}
