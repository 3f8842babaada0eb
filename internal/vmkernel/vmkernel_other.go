//go:build !linux

package vmkernel

import (
	"errors"
	"os"
)

// cache is the kernel cache; off Linux there is none.
type cache struct {
	dir string
	uid int
}

func (cache) find(string) (Kernel, error) { return Kernel{}, errors.ErrUnsupported }

func (Kernel) open() (*os.File, error) { return nil, errors.ErrUnsupported }

// HostTSCKHz is unsupported off Linux.
func HostTSCKHz() (int, error) { return 0, errors.ErrUnsupported }
