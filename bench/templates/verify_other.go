//go:build !linux

package main

import "errors"

// rootUsed needs Linux.
func (c *contender) rootUsed(string, string, string) (string, error) {
	return "", errors.ErrUnsupported
}
