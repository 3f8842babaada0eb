package sandbox

import "github.com/warden-sandbox/warden/internal/egress"

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
