//go:build !linux

package unixlisten

import (
	"errors"
	"os"
)

// Check fails off Linux, where no sandbox takes a listener.
func Check(*os.File) error { return errors.ErrUnsupported }
