//go:build !linux

package server

import (
	"errors"
	"net"
)

// keepHolder bounds a dead holder's connection on Linux only, where
// replicas run (the kubernetes backend).
func keepHolder(net.Conn) error { return errors.ErrUnsupported }
