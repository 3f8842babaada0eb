package sandbox

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Conservative caps on what a session may ask for, so no tenant holds a
// slot for a day by asking: the operator raises them with --max-ttl and
// --max-idle-timeout.
const (
	DefaultMaxTTL  = 6 * time.Hour
	DefaultMaxIdle = time.Hour
	// DefaultMaxTimeout caps one exec or run: long enough for a model
	// fitting or a package build, short enough that a forgotten loop
	// cannot hold a slot for long.
	DefaultMaxTimeout = 10 * time.Minute
)

// Share is the default cap on what each of owners (API keys) may hold of
// maxSessions: maxSessions/owners, rounded down, so however much the
// other keys take, every key can still create its whole share. With one
// owner or none it is all of maxSessions; it is never below one, though
// with more owners than slots not every owner is then sure of one.
func Share(maxSessions, owners int) int {
	if owners <= 1 {
		return maxSessions
	}
	return max(maxSessions/owners, 1)
}

// DefaultCeilings are what `warden serve` and `warden mcp` let one
// sandbox ask for unless the operator says otherwise, sized for this
// host: memory and disk (a tmpfs, so memory too) a quarter of its RAM,
// CPUs no more than its cores, open files and pids within this process's
// hard limits, and counts, times and output well above the defaults but
// far from what would hurt the host or other tenants.
// No ceiling is below spec.DefaultLimits, so a request asking for
// nothing always fits.
func DefaultCeilings() spec.Ceilings {
	quarter := 8 * spec.DefaultLimits.MemoryBytes
	if ram, err := hostMemory(); err == nil {
		quarter = roundDown(ram / 4)
	}
	c := spec.Ceilings{
		Timeout:       DefaultMaxTimeout,
		MemoryBytes:   max(quarter, spec.DefaultLimits.MemoryBytes),
		DiskBytes:     max(quarter, spec.DefaultLimits.DiskBytes),
		FileSizeBytes: max(quarter, spec.DefaultLimits.FileSizeBytes),
		CPUs:          float64(runtime.NumCPU()),
		Pids:          4096,
		OpenFiles:     65536,
		OutputBytes:   16 * spec.MiB,
		CPUTime:       time.Hour,
	}
	// A native sandbox's init inherits this process's hard limits and
	// cannot raise them, so the ceilings stay within them (never below the
	// defaults, which a start would then refuse with the bound named).
	files, procs := hardLimits()
	if files >= 0 {
		c.OpenFiles = max(min(c.OpenFiles, files), spec.DefaultLimits.OpenFiles)
	}
	if procs >= 0 {
		c.Pids = max(min(c.Pids, procs), spec.DefaultLimits.Pids)
	}
	return c
}

// roundDown rounds n down to whole GiB, or MiB below one GiB, so the
// defaults --help shows read well.
func roundDown(n int64) int64 {
	if n >= spec.GiB {
		return n / spec.GiB * spec.GiB
	}
	return n / spec.MiB * spec.MiB
}

// Validate checks that c is consistent: defaults within their caps, and
// the pool's sandboxes (built with the limits a request gets when it
// asks for none) within the ceilings, since no request could take one
// otherwise. Each message names the flag to change.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.DefaultTTL > c.MaxTTL:
		return fmt.Errorf("the default ttl %v is longer than --max-ttl %v: raise --max-ttl or lower --ttl", c.DefaultTTL, c.MaxTTL)
	case c.DefaultIdle > c.MaxIdle:
		return fmt.Errorf("the default idle timeout %v is longer than --max-idle-timeout %v: raise --max-idle-timeout or lower --idle-timeout", c.DefaultIdle, c.MaxIdle)
	case c.MaxPerOwner < 0:
		return fmt.Errorf("--max-sessions-per-key %d is negative: use 0 for the default share, or a count", c.MaxPerOwner)
	}
	if err := validExecPace(c.ExecPace); err != nil {
		return err
	}
	if err := c.Ceilings.Check(c.PoolSpec.Limits); err != nil {
		return fmt.Errorf("the default limits every sandbox and the pool start from do not fit the ceilings: %s",
			strings.TrimPrefix(err.Error(), spec.ErrInvalid.Error()+": "))
	}
	return nil
}
