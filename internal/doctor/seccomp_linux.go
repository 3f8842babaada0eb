package doctor

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/seccomp"
)

func seccompCheck() Check {
	c := Check{Name: "seccomp filter"}
	b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil {
		return Check{Name: c.Name, Status: Missing, Detail: "seccomp is not available: " + err.Error(),
			Fix: "use a kernel built with CONFIG_SECCOMP_FILTER"}
	}
	// user_notif: native boxes answer sysinfo(2) through it
	// (seccomp.InstallNotifying).
	for _, a := range []string{"kill_process", "errno", "user_notif"} {
		if !strings.Contains(string(b), a) {
			return Check{Name: c.Name, Status: Missing, Detail: "the kernel lacks the seccomp action " + a,
				Fix: "use Linux " + seccomp.MinNotifyingKernel + " or newer"}
		}
	}
	prog, err := seccomp.Program()
	if err != nil {
		return Check{Name: c.Name, Status: Missing, Detail: "loading the filter: " + err.Error()}
	}
	c.Status, c.Detail = OK, fmt.Sprintf("precompiled filters of %d BPF instructions (native, docker) and %d (gvisor)", seccomp.NotifyingLen(), len(prog))
	if scope := yamaScope(); scope >= 2 {
		c.Status, c.Detail = Warn, fmt.Sprintf("Yama ptrace_scope is %d: sysinfo(2) fails with EPERM in native and docker sandboxes (the init cannot write the caller's memory)", scope)
		c.Fix = "set kernel.yama.ptrace_scope to 0 or 1"
	}
	return c
}

// yamaScope is Yama's kernel.yama.ptrace_scope, or -1 without Yama.
func yamaScope() int {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}
