//go:build !linux

package measure

import (
	"errors"
	"os/exec"
	"time"
)

// AcctGroup needs cgroup v1's cpuacct, which only Linux has.
type AcctGroup struct{}

// NewAcctGroup fails: there is no cpuacct here.
func NewAcctGroup(string) (*AcctGroup, error) { return nil, errors.ErrUnsupported }

// Enter runs f.
func (*AcctGroup) Enter(f func() error) error { return f() }

// Sandboxes is 0: unknown.
func (*AcctGroup) Sandboxes() float64 { return 0 }

// Total fails: unknown.
func (*AcctGroup) Total() (float64, error) { return 0, errors.ErrUnsupported }

// Start fails: there is no group to start cmd in.
func (*AcctGroup) Start(*exec.Cmd) error { return errors.ErrUnsupported }

// Settle fails: unknown.
func (*AcctGroup) Settle(time.Duration) error { return errors.ErrUnsupported }

// Remove does nothing.
func (*AcctGroup) Remove() {}
