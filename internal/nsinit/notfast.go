package nsinit

import "errors"

// ErrNotFast is wrapped by ExecPlan's error for a Config warden-exec
// cannot build, whose set-up the Go init decides at run time.
var ErrNotFast = errors.New("needs the Go init")

// NotFastError is ExecPlan's refusal of a Config out of warden-exec's
// reach. Feature names what the request asks for, in words its sender
// knows and without a host path, so a server may tell a tenant; Detail
// (possibly a host path or a kernel's answer) is for the operator only.
type NotFastError struct {
	Feature, Detail string
}

func (e *NotFastError) Error() string {
	if e.Detail != "" {
		return e.Feature + " (" + e.Detail + ") " + ErrNotFast.Error()
	}
	return e.Feature + " " + ErrNotFast.Error()
}

// Is makes every NotFastError match ErrNotFast.
func (e *NotFastError) Is(target error) bool { return target == ErrNotFast }

// ErrNoExecutor is matched by Executor's error, and by a start that
// found no warden-exec to run (the spawner's included): there is no
// usable warden-exec beside this executable. Auto, which checked for one
// before choosing it, takes the Go init on it, as one removed since.
var ErrNoExecutor = errors.New("no usable warden-exec")
