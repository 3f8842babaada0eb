package doctor

import (
	"os"

	"github.com/warden-sandbox/warden/internal/native"
)

// persistCheck says whether `warden serve` can keep session workspaces
// outside the sandboxes, so they survive a crash of the server.
func persistCheck() Check {
	c := Check{Name: "persistent workspaces", Status: OK,
		Detail: "session workspaces are host tmpfs mounts in the state directory: a crash of warden serve keeps them readable"}
	switch {
	case os.Geteuid() != 0:
		c.Status, c.Detail = Warn, "not root: session workspaces live inside their sandboxes, and a crash of warden serve loses them"
		c.Fix = "run warden serve as root"
	case !native.IdmapsTmpfs():
		c.Status, c.Detail = Warn, "the kernel cannot idmap tmpfs (Linux 6.3 added it): a crash of warden serve loses session workspaces"
		c.Fix = "upgrade the kernel to 6.3 or later"
	}
	return c
}
