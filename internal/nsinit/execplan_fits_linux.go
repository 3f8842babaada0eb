package nsinit

import (
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// longestUsage stands in for the usage file's host path, known only once
// the cgroup is made after the clone: no path the executor can open is
// longer, so a plan that fits with it fits with the real one. Made at
// first use, not at package init, which every warden command pays
// (TestSlimInitIsLight).
var longestUsage = sync.OnceValue(func() string { return "/" + strings.Repeat("u", unix.PathMax-2) })

// fits refuses, wrapping ErrNotFast, a Config whose plan warden-exec
// would not take (an op over the executor's counts, such as argv over
// plan.MaxStrs less the path and workdir, or a plan over plan.MaxBytes),
// so that the choice of executor is made on the plan as it will be sent:
// auto then uses the Go init, which takes such a spec, rather than
// failing after the clone. The plan is sized at its largest, the
// longest usage path and a drain, with Encode's own checks (plan.Size),
// and not encoded: the run encodes it once, as sent.
func (f *FastPlan) fits() error {
	if _, err := plan.Size(f.Plan(longestUsage(), 0)); err != nil {
		return &NotFastError{Feature: "a command, environment or root too large for warden-exec's plan", Detail: err.Error()}
	}
	return nil
}
