// Package gvisor is the gVisor backend: each box is an OCI bundle run by
// runsc, so the user's code talks to gVisor's user-space kernel instead of
// the host's. The bundle has the native root (rootfs.Template), the same
// writable tmpfs, limits as the container's cgroup, and Warden's init as
// PID 1, which serves the same agent protocol as in every backend.
package gvisor

// StateDir holds runsc's own state (runsc/), the shared root templates
// (root-<hash>/ for the host's, img-<digest>-<layout>/ per template) and
// one directory per box (box-*/).
const StateDir = "/run/warden/gvisor"

// runscRoot is runsc's --root, where it keeps its containers' state and
// the pinned runsc their control sockets (controlSocket).
const runscRoot = StateDir + "/runsc"
