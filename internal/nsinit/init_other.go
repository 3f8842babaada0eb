//go:build !linux

package nsinit

import (
	"fmt"
	"os"
)

// Main exits at once: the init exists only on Linux.
func Main() {
	fmt.Fprintln(os.Stderr, "warden: the sandbox init runs only on Linux")
	os.Exit(1)
}
