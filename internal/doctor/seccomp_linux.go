package doctor

import (
	"fmt"
	"os"
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
	c.Status, c.Detail = OK, fmt.Sprintf("precompiled filter of %d BPF instructions", len(prog))
	return c
}
