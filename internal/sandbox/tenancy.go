package sandbox

import (
	"fmt"
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

// MaxSessionLife is the API's own bound on a session's ttl and idle
// timeout (ttl_seconds, idle_timeout_seconds up to 86400): --max-ttl and
// --max-idle-timeout may not go above it, and 0 means it.
const MaxSessionLife = 24 * time.Hour

// ShareOfMemory, as Config.MaxBytesPerOwner, gives each owner the memory
// available to warden divided by the number of owners (the share rule of
// sessions), though never less than one sandbox with the default limits.
const ShareOfMemory = -1

// DefaultCeilings are what `warden serve` and `warden mcp` let one
// sandbox ask for unless the operator says otherwise, sized for this
// host: memory and disk (a tmpfs, so memory too) a quarter of the memory
// available to warden (its cgroup's limit, if lower than the RAM), CPUs
// no more than it may use, and counts, times and output well above the
// defaults but far from what would hurt the host or other tenants. A
// backend's own hard bounds lower them further (see Config.Fit), and the
// default limits are lowered to fit them.
func DefaultCeilings() spec.Ceilings {
	quarter := 8 * spec.DefaultLimits.MemoryBytes
	if ram, err := AvailableMemory(); err == nil {
		quarter = roundDown(ram / 4)
	}
	return spec.Ceilings{
		Timeout:       DefaultMaxTimeout,
		MemoryBytes:   quarter,
		DiskBytes:     quarter,
		FileSizeBytes: quarter,
		CPUs:          availableCPUs(),
		Pids:          4096,
		OpenFiles:     65536,
		OutputBytes:   16 * spec.MiB,
		CPUTime:       time.Hour,
	}
}

// roundDown rounds n down to whole GiB, or MiB below one GiB, so the
// defaults --help shows read well.
func roundDown(n int64) int64 {
	if n >= spec.GiB {
		return n / spec.GiB * spec.GiB
	}
	return n / spec.MiB * spec.MiB
}

// Validate checks that c makes sense on its own: ceilings and caps
// neither negative nor NaN nor infinite, caps within the API's own 24h,
// defaults within their caps. Each message names the flag to change. The
// limits against the ceilings and the backend are Fit's to reconcile.
func (c Config) Validate() error {
	if err := c.Ceilings.Validate(); err != nil {
		return err
	}
	if err := checkLifeCap("--max-ttl", c.MaxTTL); err != nil {
		return err
	}
	if err := checkLifeCap("--max-idle-timeout", c.MaxIdle); err != nil {
		return err
	}
	if c.MaxBytesPerOwner < 0 && c.MaxBytesPerOwner != ShareOfMemory {
		return fmt.Errorf("--max-memory-per-key %s is negative: use a size, or 0 for no budget", spec.FormatSize(c.MaxBytesPerOwner))
	}
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
	if err := validStartRate(c.StartRate); err != nil {
		return err
	}
	return c.DefaultLimits.Validate()
}

// checkLifeCap refuses a ttl or idle cap that is negative or above the
// API's own bound; 0 means that bound.
func checkLifeCap(flag string, d time.Duration) error {
	if d < 0 || d > MaxSessionLife {
		return fmt.Errorf("%s %v is out of range: use up to %v, the API's own maximum (0 means it)", flag, d, MaxSessionLife)
	}
	return nil
}
