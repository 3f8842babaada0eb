package agent

import (
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// View is the machine a sandbox with limits l is shown (see rootfs.View):
// its memory limit and its CPU quota rounded up (0 without a quota: the
// init then shows the CPUs it may use), so that programs sizing a pool by
// the CPUs or caches by the memory size them by the sandbox. Warden's own
// affinity is not the sandbox's and plays no part.
func View(l spec.Limits) rootfs.View {
	return rootfs.View{MemoryBytes: l.MemoryBytes, CPUs: rootfs.ViewCPUs(l.CPUs)}
}
