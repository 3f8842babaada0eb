//go:build !linux

package scratch

import (
	"errors"
	"io"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Layer is Linux-only, like the scratch it reads.
func Layer(io.Writer, string, int64) error { return errors.ErrUnsupported }

// Seed is Linux-only, like the scratch it fills.
func Seed(string, string, []string) error { return errors.ErrUnsupported }

// SeedBox is Linux-only, like Seed.
func SeedBox(string, spec.Root) error { return errors.ErrUnsupported }

// Seeds is Linux-only, like Seed: elsewhere nothing is seeded.
func Seeds(string) bool { return false }
