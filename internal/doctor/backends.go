package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// backendChecks check the backends other than sandbox.DefaultBackend (which
// liveSandbox checks), by name, each with the fix its failure needs; a
// test checks that every registered backend has one.
var backendChecks = map[string]func(context.Context) Check{
	"gvisor":  func(ctx context.Context) Check { return gvisorCheck(ctx, sandbox.BackendOptions{}) },
	"docker":  dockerCheck,
	"microvm": microVMBackendCheck,
	sandbox.KubernetesBackend: func(context.Context) Check {
		return Check{Name: "backend kubernetes", Status: OK,
			Detail: "not checked here: its sandboxes are a cluster's Pods, which only warden serve --backend kubernetes reaches",
			Fix:    "install deploy/ in the cluster, and give warden serve --kube-router-key (a file of at least 32 random bytes) and a kubeconfig or the in-cluster service account"}
	},
}

// optionalBackends checks every registered backend but the default, in the
// registry's order; one without an entry in backendChecks still runs
// /bin/true, without a tailored fix.
func optionalBackends(ctx context.Context) []Check {
	var out []Check
	for _, name := range sandbox.BackendNames() {
		if name == sandbox.DefaultBackend {
			continue
		}
		check, ok := backendChecks[name]
		if !ok {
			check = func(ctx context.Context) Check {
				return runOn(ctx, Check{Name: "backend " + name}, name, sandbox.BackendOptions{}, "on --backend "+name, "")
			}
		}
		out = append(out, check(ctx))
	}
	return out
}

// gvisorCheck runs /bin/true on the gvisor backend: runsc found is not
// runsc working (a platform the host cannot run, cgroups it cannot make).
// Doctor has no --agent-transport: it runs over gVisor's default
// transport, the one the servers' sessions take unless told otherwise,
// and says which (gvisorWhere). The backend is optional, so its absence
// is only a warning; runscCheck reports which runsc it runs.
func gvisorCheck(ctx context.Context, o sandbox.BackendOptions) Check {
	c := Check{Name: "backend gvisor"}
	if _, err := gvisor.FindRunsc(o.Runsc); err != nil {
		c.Status, c.Detail, c.Fix = Warn, "--backend gvisor is unavailable: "+err.Error(), runscFix
		return c
	}
	return runOn(ctx, c, "gvisor", o, gvisorWhere(),
		"run as root with cgroups; try --runsc-platform ptrace (kvm needs a guest-capable /dev/kvm)")
}

// runscFix is the fix of a runsc missing, untrusted or old.
const runscFix = "make runsc (builds the pinned runsc and installs it as " + gvisor.DefaultRunsc + "), or pass --runsc PATH"

// runscCheck names the runsc the gvisor backend runs and its version,
// warning of one older than the pin (Debian's is 2022-12-19) or of no
// known version.
func runscCheck(ctx context.Context, name string) Check {
	c := Check{Name: "runsc", Status: Warn, Fix: runscFix}
	p, err := gvisor.FindRunsc(name)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	v, err := gvisor.ReadRunscVersion(ctx, p)
	switch {
	case err != nil:
		c.Detail = err.Error()
	case v.Date == "":
		c.Detail = fmt.Sprintf("%s says version %s, of no known date: it may lack the pinned runsc's fixes (%s)", p, v.Version, gvisor.PinnedRunscDate)
	case v.OlderThanPin():
		c.Detail = fmt.Sprintf("%s is runsc %s, older than the pinned %s: no lazy restore or OOM handling of its own, gVisor's later fixes missing", p, v.Version, gvisor.PinnedRunscDate)
	default:
		c.Status, c.Detail, c.Fix = OK, fmt.Sprintf("%s, version %s", p, v.Version), ""
	}
	return c
}

// gvisorWhere is where gvisorCheck's run took place: gVisor over its
// default agent transport, the only one it checks.
func gvisorWhere() string {
	return "in gVisor over the " + string(sandbox.SessionTransport("gvisor", "")) + " transport (the servers' default; --agent-transport fd is not checked)"
}

// dockerCheck runs /bin/true on the docker backend when an engine
// answers; the backend is optional, so its absence is only a warning.
func dockerCheck(ctx context.Context) Check {
	return runOn(ctx, Check{Name: "backend docker"}, "docker", sandbox.BackendOptions{}, "in a container",
		"apt-get install docker.io and start dockerd (here: dockerd --iptables=false --bridge=none), or set DOCKER_HOST")
}

// microVMBackendCheck runs /bin/true on the microvm backend where the
// launcher has what it needs (microVMCheck's inventory: QEMU and the
// guest kernel, whose gap it reports with its fix instead). The result
// names the accelerator: under TCG every box is emulated.
func microVMBackendCheck(ctx context.Context) Check {
	if inv := microVMCheck(ctx); inv.Status != OK {
		return Check{Name: "backend microvm", Status: Warn, Detail: inv.Detail, Fix: inv.Fix}
	}
	accel := microvm.HostAccel()
	return runOn(ctx, Check{Name: "backend microvm"}, "microvm", sandbox.BackendOptions{}, "in a microVM ("+string(accel.Accel)+")",
		"run as root with warden-init beside warden (make build); the microvm line above says what QEMU and the guest kernel lack")
}

// runOn fills c with the outcome of running /bin/true on backend name:
// an optional backend that does not work is a warning, with fix.
func runOn(ctx context.Context, c Check, name string, o sandbox.BackendOptions, where, fix string) Check {
	b, err := sandbox.NewBackend(name, o)
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	l := spec.DefaultLimits
	l.Timeout = 30 * time.Second
	r, err := b.Run(ctx, spec.Spec{Command: []string{"true"}, Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, nil, sandbox.Stream{})
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = Warn, "--backend "+name+" does not work here: "+err.Error(), fix
	case r.ExitCode != 0:
		c.Status, c.Detail = Warn, fmt.Sprintf("true exited %d %s: %s", r.ExitCode, where, strings.TrimSpace(r.Stderr))
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("ran true %s in %.0f ms", where, r.WallTimeMS)
	}
	return c
}
