package doctor

import (
	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/vmbox"
)

// RootBackend is a backend that keeps templates' shared roots in its
// state directory: doctor lists the unused ones and `warden template rm`
// and `gc` remove them, from this one list.
type RootBackend struct {
	// Name is the backend's, as notes and gc's output show it.
	Name string
	// State is its state directory.
	State string
	// Unused lists the roots in a state directory that Remove would
	// remove; keep holds the store's template digests.
	Unused func(state string, keep func(digest string) bool) ([]string, error)
	// Remove removes them, under the store's lock.
	Remove func(state string, keep func(digest string) bool) ([]string, error)
}

// RootBackends are the backends with templates' shared roots.
func RootBackends() []RootBackend {
	return []RootBackend{
		{"gvisor", gvisor.StateDir, gvisor.UnusedTemplateRoots, gvisor.RemoveTemplateRoots},
		{"microvm", vmbox.StateDir, vmbox.UnusedTemplateRoots, vmbox.RemoveTemplateRoots},
	}
}
