//go:build !slim

package main

import (
	"fmt"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// checkSnapshotCompression refuses an unknown --snapshot-compression,
// and fast where no memory image is written for it to compress: a
// backend without memory snapshots, or gvisor over descriptors
// (sandbox.CompressionUnused), --snapshot-memory=false, or --state-dir
// none (no snapshot or fork at all). It follows checkExecutor: a choice
// whose other value would be ignored is refused, in one line saying
// what to change.
func checkSnapshotCompression(backend string, o sandbox.BackendOptions, snapshotMemory bool, stateDir string) error {
	c := o.SnapshotCompression
	if err := c.Validate(); err != nil {
		return fmt.Errorf("--snapshot-compression %q: want %s", c, gvisor.CompressionChoices())
	}
	if c != gvisor.CompressionFast {
		return nil
	}
	why := sandbox.CompressionUnused(backend, o.AgentTransport)
	switch {
	case why != "":
	case !snapshotMemory:
		why = "--snapshot-memory=false writes no memory image: drop one of the two"
	case stateDir == "none" || stateDir == "":
		why = "--state-dir none keeps no snapshot: give a --state-dir, or drop --snapshot-compression"
	default:
		return nil
	}
	return fmt.Errorf("--snapshot-compression fast: %s", why)
}
