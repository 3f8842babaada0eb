package agent

import (
	"runtime"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// View is the machine a sandbox with limits l is shown (see rootfs.View):
// its memory limit and its CPU quota rounded up, so that programs sizing
// a pool by the CPUs or caches by the memory size them by the sandbox.
func View(l spec.Limits) rootfs.View {
	return rootfs.View{MemoryBytes: l.MemoryBytes, CPUs: rootfs.ViewCPUs(l.CPUs, runtime.NumCPU())}
}
