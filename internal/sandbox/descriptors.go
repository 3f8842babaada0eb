package sandbox

import "github.com/warden-sandbox/warden/internal/egress"

// DescriptorsPerSandbox is how many descriptors one session or one-shot
// run may hold in the server process at most, which the server keeps
// free of connections for it (see internal/connlimit): measured, an idle
// session holds 10 (control socket, workspace directory, cgroup files,
// pidfds) and an exec 3 more (its pipes), rounded up to 24 for room; its
// egress proxy holds at most egress.ServerDescriptors.
const DescriptorsPerSandbox = 24 + egress.ServerDescriptors
