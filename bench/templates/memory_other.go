//go:build !linux

package main

import (
	"errors"
	"strings"
)

// memoryPart needs Linux's /proc.
func memoryPart(*strings.Builder, options, string) error { return errors.ErrUnsupported }
