//go:build !linux

package podinit

import (
	"errors"
	"fmt"
	"os"
)

// IsPod is false off Linux: a Pod's init runs Linux.
func IsPod([]string) bool { return false }

// Main is unreachable off Linux (IsPod is false); it exits saying so.
func Main() {
	fmt.Fprintln(os.Stderr, "warden-init pod:", errors.ErrUnsupported)
	os.Exit(2)
}
