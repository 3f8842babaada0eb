//go:build linux && !amd64

package microvm

import (
	"errors"
	"fmt"
	"runtime"
)

// confineThread refuses: Warden's filter for QEMU is written for the
// x86_64 syscall table, and QEMU runs nowhere without it.
func confineThread() error {
	return fmt.Errorf("microvm: QEMU's seccomp filter is written for amd64, not %s: %w", runtime.GOARCH, errors.ErrUnsupported)
}
