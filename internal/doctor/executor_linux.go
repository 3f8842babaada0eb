package doctor

import "github.com/warden-sandbox/warden/internal/nsinit"

// executorCheck reports warden-exec, the C executor of one-shot runs: its
// absence is no fault, as one-shot runs use the Go init without it.
func executorCheck() Check {
	c := Check{Name: "fast executor", Status: OK}
	p, err := nsinit.Executor()
	if err != nil {
		c.Detail = err.Error() + " (one-shot runs use the Go init)"
		return c
	}
	c.Detail = p + " is present and trusted; this warden does not start it yet, one-shot runs use the Go init"
	return c
}
