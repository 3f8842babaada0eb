//go:build !linux

package seccomp

import "errors"

// InstallOnThread is unsupported outside Linux: seccomp is a Linux facility.
// It exists so packages that mention it still build on other systems.
func InstallOnThread() error {
	return errors.ErrUnsupported
}
