//go:build !linux

package main

import "errors"

// acctGroup needs cgroup v1's cpuacct.
type acctGroup struct{}

func newAcctGroup(string) (*acctGroup, error) { return nil, errors.ErrUnsupported }
func (*acctGroup) enter(f func() error) error { return f() }
func (*acctGroup) sandboxes() float64         { return 0 }
func (*acctGroup) remove()                    {}
