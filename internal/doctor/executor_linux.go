package doctor

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// executorCheck reports warden-exec, the C executor of one-shot runs,
// and whether runs will use it: its absence is no fault, as one-shot runs
// use the Go init without it; one present but untrusted is a warning,
// since it was meant to be used and is not.
func executorCheck() Check {
	p, err := nsinit.Executor()
	return executorStatus(p, err, besideSelf(nsinit.ExecName))
}

// executorStatus is the line for nsinit.Executor's answer (p, err) when
// a file named warden-exec sits (present) or not beside warden.
func executorStatus(p string, err error, present bool) Check {
	c := Check{Name: "fast executor", Status: OK}
	switch {
	case err != nil && present:
		c.Status = Warn
		c.Detail = err.Error() + "; one-shot runs use the Go init until it is fixed"
	case err != nil:
		c.Detail = err.Error() + " (one-shot runs use the Go init)"
	default:
		c.Detail = p + " is present and trusted: one-shot native runs (warden run, --executor auto) use it, except with a template's root, --net proxy or a workspace without idmapped mounts, which use the Go init"
	}
	return c
}

// besideSelf says whether a file named name sits beside this executable.
func besideSelf(name string) bool {
	self, err := os.Executable()
	if err != nil {
		return false
	}
	_, err = os.Lstat(filepath.Join(filepath.Dir(self), name))
	return !errors.Is(err, os.ErrNotExist)
}
