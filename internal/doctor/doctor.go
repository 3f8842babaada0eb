// Package doctor inspects the host for what each isolation layer needs and
// says, for every missing piece, why it matters and how to fix it. It is
// what `warden doctor` prints, and what Warden's errors point to when a
// host feature is missing.
package doctor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Status grades one check.
type Status string

// Statuses, from good to bad. Missing means a sandbox cannot run (or a
// limit cannot be enforced) here; Warn means a degraded but safe setup.
const (
	OK      Status = "ok"
	Warn    Status = "warn"
	Missing Status = "missing"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Run performs every check, the last one a real sandbox run, so the report
// never claims a layer works that has not been seen working.
func Run(ctx context.Context) []Check {
	rep := cgroup.Probe()
	checks := []Check{userNamespaces(), seccompCheck(), persistCheck(), executorCheck()}
	checks = append(checks, cgroupChecks(rep)...)
	checks = append(checks, liveSandbox(ctx, rep.CanCreate))
	checks = append(checks, runscCheck(ctx, ""))
	checks = append(checks, optionalBackends(ctx)...)
	return append(checks, microVMCheck(ctx))
}

// Healthy reports whether no check is missing.
func Healthy(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Missing {
			return false
		}
	}
	return true
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func userNamespaces() Check {
	c := Check{Name: "user namespaces", Status: OK}
	n, err := readInt("/proc/sys/user/max_user_namespaces")
	switch {
	case err != nil:
		return Check{Name: c.Name, Status: Missing, Detail: "cannot read user.max_user_namespaces: " + err.Error(),
			Fix: "use a kernel built with CONFIG_USER_NS"}
	case n == 0:
		return Check{Name: c.Name, Status: Missing, Detail: "user.max_user_namespaces is 0",
			Fix: "sysctl -w user.max_user_namespaces=15000"}
	}
	c.Detail = fmt.Sprintf("user.max_user_namespaces=%d", n)
	if os.Geteuid() == 0 {
		return c
	}
	if v, err := readInt("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && v == 0 {
		return Check{Name: c.Name, Status: Missing, Detail: "kernel.unprivileged_userns_clone=0 forbids them for ordinary users",
			Fix: "sysctl -w kernel.unprivileged_userns_clone=1, or run warden as root"}
	}
	if v, err := readInt("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && v == 1 {
		return Check{Name: c.Name, Status: Missing, Detail: "AppArmor restricts unprivileged user namespaces",
			Fix: "add an AppArmor profile allowing userns for the warden binary, or run warden as root"}
	}
	return c
}

func cgroupChecks(rep cgroup.Report) []Check {
	where := rep.Where
	if where == "" {
		where = "nowhere"
	}
	out := []Check{{Name: "cgroups", Status: OK, Detail: fmt.Sprintf("mode %s, using %s under %s", rep.Mode, rep.Version, where)}}
	if !rep.CanCreate {
		out[0].Status, out[0].Detail = Missing, rep.Reason
		out[0].Fix = "run as root, or start warden in a delegated cgroup: systemd-run --user --scope -p Delegate=yes warden ..."
	}
	for _, ctl := range rep.Controllers {
		c := Check{Name: "limit: " + ctl.Name, Status: OK, Detail: ctl.Reason}
		switch {
		case ctl.Available:
		case ctl.Name == "pids" && os.Geteuid() != 0:
			c.Status = Warn
			c.Detail = "no pids cgroup; --pids is enforced by RLIMIT_NPROC, which the user namespace makes per-sandbox"
		default:
			c.Status = Missing
			c.Fix = "a --" + cgroup.FlagName(ctl.Name) + " limit will be refused; pass --" + cgroup.FlagName(ctl.Name) + " 0 to run without it"
		}
		if c.Detail == "" {
			c.Detail = "enforced by the " + ctl.Name + " controller"
		}
		out = append(out, c)
	}
	return append(out, freezeCheck(rep))
}

// freezeCheck says whether native sessions can be paused here: the cgroup
// freezer stops a native box (gVisor and Docker pause their own way).
func freezeCheck(rep cgroup.Report) Check {
	c := Check{Name: "pause (native)", Status: OK, Detail: "sessions are paused by the cgroup freezer"}
	if rep.NoFreeze != "" {
		c.Status, c.Detail = Warn, rep.NoFreeze
		c.Fix = "pausing a native session answers 501 here; the other limits are unaffected"
		if rep.Mode == "v1" || rep.Mode == "hybrid" {
			c.Fix = "mount the v1 freezer hierarchy (mkdir -p /sys/fs/cgroup/freezer && mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer); until then " + c.Fix
		}
	}
	return c
}

// liveSandbox builds a real sandbox and runs /bin/true in it: the one check
// that proves namespaces, mounts, pivot_root, /proc and seccomp all work.
func liveSandbox(ctx context.Context, cgroups bool) Check {
	c := Check{Name: "sandbox run"}
	l := spec.DefaultLimits
	l.Timeout = 20 * time.Second
	if !cgroups {
		l.MemoryBytes, l.CPUs = 0, 0
	}
	r, err := native.Run(ctx, spec.Spec{Command: []string{"true"}, Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, native.IO{})
	switch {
	case err != nil:
		c.Status, c.Detail = Missing, err.Error()
	case r.ExitCode != 0:
		c.Status, c.Detail = Missing, fmt.Sprintf("true exited %d: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("ran true in %.1f ms", r.WallTimeMS)
	}
	return c
}
