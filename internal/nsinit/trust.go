package nsinit

import "errors"

// ErrUntrusted marks a file that OpenTrusted or OpenTrustedData refuses:
// someone other than root or this user could replace it, so running it
// (or booting it) would run their code with this process's rights.
var ErrUntrusted = errors.New("refusing an untrusted binary")
