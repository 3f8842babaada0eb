//go:build !linux

package doctor

// persistCheck reports that persistent workspaces are Linux-only.
func persistCheck() Check {
	return Check{Name: "persistent workspaces", Status: Warn, Detail: "Linux-only: they are idmapped tmpfs mounts"}
}
