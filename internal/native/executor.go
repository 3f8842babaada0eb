package native

import (
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

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
		return "", &ExecutorRefusedError{Why: whyNot}
	}
	return ExecutorGo, nil
}

// ErrExecutorUnavailable is wrapped by an ExecutorRefusedError whose
// cause is this host, not the spec: warden-exec missing, untrusted, of
// another build, or on a cgroup hierarchy not yet covered.
var ErrExecutorUnavailable = errors.New("warden-exec is unavailable on this host")

// ExecutorRefusedError is --executor fast's refusal of a spec, given why
// warden-exec cannot build it (Why). Its Error is the full line, for the
// operator (warden run's user, a server's log), which may name a flag or
// a host path; Public is the line a server's tenant gets. It wraps
// errors.ErrUnsupported for a spec out of warden-exec's reach
// (nsinit.NotFastError), else ErrExecutorUnavailable, and Why itself, so
// the server answers 501 or 503 and errors.Is still sees the cause.
type ExecutorRefusedError struct {
	Why error
}

func (e *ExecutorRefusedError) Error() string {
	return fmt.Sprintf("--executor fast: %v; use --executor auto", e.Why)
}

// Unwrap is Why and the class of the refusal (see the type's doc).
func (e *ExecutorRefusedError) Unwrap() []error {
	if _, ok := e.notFast(); ok {
		return []error{e.Why, errors.ErrUnsupported}
	}
	return []error{e.Why, ErrExecutorUnavailable}
}

// Public is the refusal in a line for a server's tenant: the request's
// feature warden-exec cannot build and what to use instead, or that the
// server cannot run one-shot runs now; never a flag or a host path.
func (e *ExecutorRefusedError) Public() string {
	if nf, ok := e.notFast(); ok {
		return "this server builds one-shot runs only with warden-exec, which cannot build " + nf.Feature + ": use a session"
	}
	return "this server builds one-shot runs only with warden-exec, which is unavailable on it: ask its operator (the server log says why)"
}

func (e *ExecutorRefusedError) notFast() (*nsinit.NotFastError, bool) {
	var nf *nsinit.NotFastError
	return nf, errors.As(e.Why, &nf)
}
