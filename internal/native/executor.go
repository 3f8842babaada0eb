package native

import "fmt"

// Executor chooses what builds a one-shot sandbox inside its namespaces:
// the Go init (nsinit), or warden-exec, the small executor that starts no
// Go runtime (cmd/warden-exec). Sessions always use the Go init, which
// stays as their agent.
type Executor string

// The executors. The zero value is ExecutorAuto.
const (
	// ExecutorAuto is ExecutorFast where it can build the spec, else
	// ExecutorGo.
	ExecutorAuto Executor = "auto"
	// ExecutorGo is the Go init.
	ExecutorGo Executor = "go"
	// ExecutorFast is warden-exec; a spec it cannot build is an error
	// naming why.
	ExecutorFast Executor = "fast"
)

// Executors lists the valid values, for flags and their help.
var Executors = []Executor{ExecutorAuto, ExecutorGo, ExecutorFast}

// Validate says whether e is one of Executors (or zero).
func (e Executor) Validate() error {
	if e == "" {
		return nil
	}
	for _, v := range Executors {
		if e == v {
			return nil
		}
	}
	return fmt.Errorf("executor %q: want one of auto, go, fast", string(e))
}

// pick is the executor that builds a spec, given why warden-exec cannot
// build it (nil: it can): fast where it can unless go was asked for, and
// for fast where it cannot, an error naming why in one line.
func (e Executor) pick(whyNot error) (Executor, error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	switch {
	case e == ExecutorGo:
		return ExecutorGo, nil
	case whyNot == nil:
		return ExecutorFast, nil
	case e == ExecutorFast:
		return "", fmt.Errorf("--executor fast: %v; use --executor auto", whyNot)
	}
	return ExecutorGo, nil
}
