package cgroup

// Report is what Probe found out about this host and user: plain data, so that `warden doctor`
// can format it (or print it as JSON) as it likes.
type Report struct {
	// Mode is how the host mounts cgroups: "v1" (legacy), "hybrid" (v1 controllers plus an
	// empty v2 hierarchy), "v2" (unified) or "none".
	Mode string
	// Version is the hierarchy Warden uses here: "v1", "v2", or "" when it can use none.
	Version string
	// Controllers are memory, pids and cpu, in that order.
	Controllers []ControllerReport
	// CanCreate tells whether this process can create cgroups where Warden would.
	CanCreate bool
	// Where is the directory Warden creates cgroups under, in one hierarchy: on v1 the
	// memory controller's <own>/warden; on v2 <top>/warden as root, <own>/warden in a
	// delegated cgroup.
	Where string
	// Reason is one line saying why CanCreate is false, or "".
	Reason string
	// NoFreeze says why a sandbox's cgroup cannot be frozen here (Freeze, which pausing a
	// native session needs), or "" when it can.
	NoFreeze string
}

// ControllerReport is one controller's line in the doctor's output.
type ControllerReport struct {
	// Name is "memory", "pids" or "cpu".
	Name string
	// Available tells whether a limit on this controller would be applied.
	Available bool
	// Reason is one line: why not and how to fix it, or a caveat when available (for
	// example swap not being limited), or "".
	Reason string
}
