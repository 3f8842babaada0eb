//go:build !linux

package main

import (
	"context"

	"github.com/warden-sandbox/warden/internal/doctor"
)

// binaryChecks has nothing to report where sandboxes cannot run: the
// files next to warden are Linux's.
func binaryChecks(context.Context, string) []doctor.Check { return nil }

// microVMBootCheck says microVMs need Linux.
func microVMBootCheck(context.Context, string) doctor.Check {
	return doctor.Check{Name: "microvm boot", Status: doctor.Warn, Detail: "microVMs need a Linux host"}
}
