//go:build !linux

package seccomp

import "errors"

// InstallOnThread is unsupported outside Linux: seccomp is a Linux facility.
// It exists so packages that mention it still build on other systems.
func InstallOnThread() error {
	return errors.ErrUnsupported
}

// InstallNotifying is unsupported outside Linux, as InstallOnThread is.
func InstallNotifying() (int, error) {
	return -1, errors.ErrUnsupported
}

// MinNotifyingKernel is the oldest Linux whose seccomp user notification
// the sandbox init can serve; it is named on every system for doctor's
// advice.
const MinNotifyingKernel = "5.0"
