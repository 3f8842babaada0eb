package bedpod

import "github.com/warden-sandbox/warden/internal/nsinit"

// The uids of the bed's Pods, which tests check a session's `id -u`
// against.
const (
	// PodUID is the uid of a Pod's container in deploy/'s default
	// template: Unboxed's init and sessions run as it, and it owns each
	// of Init's Pods' workspaces on the host.
	PodUID = 65532
	// InitUID is what Init's sessions run as: the native sandbox's uid.
	InitUID = nsinit.SandboxUID
)
