//go:build !linux

package kubebed

import (
	"errors"
	"syscall"
)

// processGroup has no process groups to offer here.
func processGroup() *syscall.SysProcAttr { return nil }

// signalGroup cannot signal a group here.
func signalGroup(int, syscall.Signal) error { return errors.ErrUnsupported }
