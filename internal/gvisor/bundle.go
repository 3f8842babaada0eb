package gvisor

import (
	"path"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Bundle is what one box's config.json is made from.
type Bundle struct {
	// Root is the template directory (rootfs.Template.Dir), read-only.
	Root string
	// Binds are paths bound read-only from the same path under From
	// (rootfs.Template.From): the host's root when From is empty, a
	// template's tree otherwise.
	Binds []string
	From  string
	// VarTmp binds the scratch's tmp at /var/tmp too (a template's
	// /var/tmp, rootfs.ImageVarTmp).
	VarTmp bool
	// Scratch is the host tmpfs holding the writable directories, by
	// name (rootfs.ScratchDirs) and where each goes in the box.
	Scratch     string
	ScratchDirs map[string]string
	// Init is the warden binary, bound at InitPath.
	Init, InitPath string
	// Args is the init's command line in the box.
	Args []string
	// CgroupsPath is where runsc puts the sandbox's cgroup.
	CgroupsPath string
	Limits      spec.Limits
}

// keptCaps are the init's capabilities in the box: what its agent keeps
// after lockdown (setting the user's ids, signalling), CAP_SETPCAP to
// drop the rest from its bounding set, as the native init does, and
// CAP_SYS_ADMIN, gVisor's own (it grants nothing on the host), for the
// user's PID namespace and its /proc, which hide the agent from the user
// (Config.HideAgent), before the agent drops it.
var keptCaps = []string{"CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SETPCAP", "CAP_SYS_ADMIN"}

// sentryTasks is the head-room the box's pids cgroup gives gVisor itself
// (the sentry's and the gofer's threads) on top of the user's tasks.
const sentryTasks = 256

// hostTasksPerTask is how many host tasks the pids cgroup allows for each
// task of the box: under runsc's ptrace platform a task of the box costs
// the host a stub and the sentry's thread that traces it, and more
// threads while it makes system calls (measured: --pids 60 peaked past
// 292 host tasks, about 4.5 a task). Too tight a bound kills the whole
// sandbox when the sentry cannot make a thread, where the user should
// only see fork fail at RLIMIT_NPROC.
const hostTasksPerTask = 8

// cpuPeriod is the CFS period the CPU quota is expressed in.
const cpuPeriod = 100 * time.Millisecond

// Spec is the OCI runtime spec of the box.
func (b Bundle) Spec() *specs.Spec {
	caps := append([]string(nil), keptCaps...)
	s := &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: b.Root, Readonly: true},
		Process: &specs.Process{
			User:            specs.User{UID: 0, GID: 0},
			Args:            b.Args,
			Env:             []string{"GOMAXPROCS=1", "PATH=/usr/bin:/bin"},
			Cwd:             "/",
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
		},
		Mounts: b.mounts(),
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
			},
			CgroupsPath: b.CgroupsPath,
			Resources:   resources(b.Limits),
		},
	}
	return s
}

func (b Bundle) mounts() []specs.Mount {
	ms := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "mode=755", "size=65536k"}},
	}
	for _, p := range b.Binds {
		ms = append(ms, bind(filepath.Join("/", b.From, p), p, "ro", "nosuid", "nodev"))
	}
	ms = append(ms, bind(b.Init, b.InitPath, "ro", "nosuid", "nodev"))
	for name, dst := range b.ScratchDirs {
		ms = append(ms, bind(filepath.Join(b.Scratch, name), dst, "rw", "nosuid", "nodev"))
	}
	if b.VarTmp {
		ms = append(ms, bind(filepath.Join(b.Scratch, "tmp"), "/var/tmp", "rw", "nosuid", "nodev"))
	}
	return sortMounts(ms)
}

func bind(src, dst string, opts ...string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: append([]string{"rbind"}, opts...)}
}

// sortMounts orders mounts parents first (/dev before /dev/shm), which a
// runtime needs; among unrelated paths the order is kept.
func sortMounts(ms []specs.Mount) []specs.Mount {
	out := make([]specs.Mount, 0, len(ms))
	for depth := 1; len(out) < len(ms); depth++ {
		for _, m := range ms {
			if depthOf(m.Destination) == depth {
				out = append(out, m)
			}
		}
	}
	return out
}

func depthOf(p string) int {
	n := 0
	for p = path.Clean(p); p != "/"; p = path.Dir(p) {
		n++
	}
	return n
}

// resources are the spec's limits as the container's cgroup.
func resources(l spec.Limits) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if l.MemoryBytes > 0 {
		mem := l.MemoryBytes
		r.Memory = &specs.LinuxMemory{Limit: &mem, Swap: &mem}
	}
	if l.Pids > 0 {
		// The cgroup counts the host's tasks: gVisor's own threads and,
		// on the ptrace platform, one stub per task of the box. The exact
		// limit is RLIMIT_NPROC inside, which gVisor enforces; this only
		// bounds the box as a whole on the host.
		pids := l.Pids*hostTasksPerTask + sentryTasks
		r.Pids = &specs.LinuxPids{Limit: &pids}
	}
	if l.CPUs > 0 {
		period := uint64(cpuPeriod / time.Microsecond)
		quota := int64(l.CPUs * float64(period))
		r.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	return r
}
