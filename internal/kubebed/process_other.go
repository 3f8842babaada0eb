//go:build !linux

package kubebed

import (
	"errors"
	"syscall"
)

// processesSupported: the bed's processes need Linux's process groups
// and parent-death signal, so that none outlives its bed.
func processesSupported() error { return errors.ErrUnsupported }

// processGroup has no process groups to offer here.
func processGroup() *syscall.SysProcAttr { return nil }

// signalGroup cannot signal a group here.
func signalGroup(int, syscall.Signal) error { return errors.ErrUnsupported }
