//go:build !linux

package vmguest

import (
	"errors"
	"fmt"
	"os"
)

// IsGuest is false off Linux: a microVM guest runs Linux.
func IsGuest([]string) bool { return false }

// Main is unreachable off Linux (IsGuest is false); it exits saying so.
func Main() {
	fmt.Fprintln(os.Stderr, "warden-init: microVM guest:", errors.ErrUnsupported)
	os.Exit(2)
}
