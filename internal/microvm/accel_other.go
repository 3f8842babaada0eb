//go:build !linux

package microvm

import "errors"

var realProbe = hostProbe{
	kvmVersion: func() (int, error) { return 0, errors.ErrUnsupported },
	cpuinfo:    func() ([]byte, error) { return nil, errors.ErrUnsupported },
	kvmNode:    func() (uint32, uint32, error) { return 0, 0, errors.ErrUnsupported },
}
