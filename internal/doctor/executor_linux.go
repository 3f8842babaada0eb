package doctor

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/nsinit"
)

// executorCheck reports warden-exec, the C executor of one-shot runs,
// and whether runs will use it: its absence is no fault, as one-shot runs
// use the Go init without it; one present but untrusted, or of another
// build, is a warning, since it was meant to be used and is not. Where
// it is usable, the verdict is native.FastVerdict's: the checks a default
// run makes, so doctor says what runs do.
func executorCheck() Check {
	p, err := nsinit.Executor()
	var verdict error
	if err == nil {
		verdict = native.FastVerdict()
	}
	return executorStatus(p, err, besideSelf(nsinit.ExecName), verdict)
}

// executorStatus is the line for nsinit.Executor's answer (p, err) when
// a file named warden-exec sits (present) or not beside warden, and
// verdict is native.FastVerdict's for a usable one.
func executorStatus(p string, err error, present bool, verdict error) Check {
	c := Check{Name: "fast executor", Status: OK}
	switch {
	case err != nil && present:
		c.Status = Warn
		c.Detail = err.Error() + "; one-shot runs use the Go init until it is fixed"
	case err != nil:
		c.Detail = err.Error() + " (one-shot runs use the Go init)"
	case verdict != nil:
		c.Detail = p + " is present and trusted, but a default one-shot run uses the Go init: " + verdict.Error()
	default:
		c.Detail = p + " is present and trusted: a default one-shot native run (warden run, and warden serve's and warden mcp's one-shot runs without a pooled box; --executor auto) uses it; specs it cannot build use the Go init, each named by `warden run --executor fast`; sessions and pooled boxes keep the Go init"
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
