//go:build !linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
)

// Main exits at once: the init exists only on Linux.
func Main() {
	fmt.Fprintln(os.Stderr, "warden: the sandbox init runs only on Linux")
	os.Exit(1)
}

// OpenTrusted refuses: binaries next to warden are run only on Linux.
func OpenTrusted(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// OpenTrustedTree refuses: binaries are run only on Linux.
func OpenTrustedTree(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// OpenTrustedData refuses: the files it opens are loaded only on Linux.
func OpenTrustedData(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// ExecFD refuses: binaries next to warden are run only on Linux.
func ExecFD(*os.File, []string, []string) error { return errors.ErrUnsupported }
