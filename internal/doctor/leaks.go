package doctor

// Leak is something a Warden that is gone left on this host: a cgroup, a
// process, an egress socket. A running Warden's own sandboxes are not
// leaks. TemplateRoots uses it too, for caches listed as information.
type Leak struct {
	// Kind is "cgroup", "process", "egress socket", "backend state",
	// "container", "gvisor root", "microvm root" or "template root".
	Kind string `json:"kind"`
	// What names it: a path, or a pid and its command.
	What string `json:"what"`
	// Why says how it was judged left behind, and how it goes away.
	Why string `json:"why"`
}
