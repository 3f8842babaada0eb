package sandbox

import (
	"errors"
	"fmt"

	"github.com/warden-sandbox/warden/internal/spec"
)

// HardCeiling is a limit a backend cannot give a sandbox more of,
// whatever the operator's ceilings say: the native backend's init
// inherits warden's hard rlimits and cannot raise them.
type HardCeiling struct {
	// Field is the limit, as spec.CeilingFields names it ("open files").
	Field string
	// Value is the most a sandbox can be given.
	Value int64
	// Least is the fewest any sandbox needs to work: below it the server
	// refuses to start rather than serve only refusals.
	Least int64
	// Source names the bound ("warden's hard RLIMIT_NOFILE") and Raise
	// how the operator raises it.
	Source, Raise string
}

// HardLimited is a Backend with HardCeilings.
type HardLimited interface {
	// HardCeilings are the backend's bounds, fixed for this process.
	HardCeilings() []HardCeiling
}

// Fit makes c hold on backend b: ceilings no higher than b's hard
// bounds, default limits (what a request asking for none gets, and what
// the pool builds) no higher than the ceilings, and the per-owner memory
// budget resolved. It returns the adjusted Config and one line per value
// it lowered, for the operator's log. It fails, naming the fix, only when
// nothing sane fits: a hard bound below what any sandbox needs, or a
// budget below one default sandbox. NewManager applies it too.
func (c Config) Fit(b Backend) (Config, []string, error) {
	c = c.withDefaults()
	var notes []string
	if _, remote := b.(RemoteBackend); remote && c.Pool > 0 {
		return c, notes, fmt.Errorf("--pool %d: backend %s keeps its warm sandboxes in its own pool (the cluster's SandboxWarmPool): drop --pool", c.Pool, b.Name())
	}
	if h, ok := b.(HardLimited); ok {
		for _, hc := range h.HardCeilings() {
			note, err := c.fitHard(hc)
			if err != nil {
				return c, notes, err
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
	}
	var clamped []*spec.CeilingError
	c.DefaultLimits, clamped = c.Ceilings.Clamp(c.DefaultLimits)
	for _, e := range clamped {
		asked := e.Value
		if e.Unlimited {
			asked = "none"
		}
		notes = append(notes, fmt.Sprintf("the default %s limit is lowered from %s to %s, the ceiling set by --%s", e.Field.Name, asked, e.Ceiling, e.Field.Flag))
	}
	note, err := c.fitBudget()
	if note != "" {
		notes = append(notes, note)
	}
	return c, notes, err
}

// fitHard lowers the ceiling hc bounds to hc.Value.
func (c *Config) fitHard(hc HardCeiling) (string, error) {
	f, ok := ceilingField(hc.Field)
	if !ok {
		return "", fmt.Errorf("the backend bounds %q, which no ceiling names", hc.Field)
	}
	if hc.Value < hc.Least {
		return "", fmt.Errorf("%s is %d, below the %d %s a sandbox needs: start warden with a higher hard limit (%s)",
			hc.Source, hc.Value, hc.Least, hc.Field, hc.Raise)
	}
	p, ok := f.Field((*spec.Limits)(&c.Ceilings)).(*int64)
	if !ok || (*p > 0 && *p <= hc.Value) {
		return "", nil
	}
	was := "none"
	if *p > 0 {
		was = fmt.Sprint(*p)
	}
	*p = hc.Value
	if c.hardBounds == nil {
		c.hardBounds = map[string]string{}
	}
	c.hardBounds[hc.Field] = hc.Source
	return fmt.Sprintf("the %s ceiling (--%s) is lowered from %s to %d, %s, which no sandbox can exceed (raise it with %s)",
		hc.Field, f.Flag, was, hc.Value, hc.Source, hc.Raise), nil
}

func ceilingField(name string) (spec.CeilingField, bool) {
	for _, f := range spec.CeilingFields {
		if f.Name == name {
			return f, true
		}
	}
	return spec.CeilingField{}, false
}

// fitBudget resolves ShareOfMemory and refuses a budget no default
// sandbox fits in.
func (c *Config) fitBudget() (string, error) {
	one := charge(c.DefaultLimits)
	if one < 0 && c.MaxBytesPerOwner != 0 {
		return "", fmt.Errorf("the default limits set no memory or no disk bound, which no per-key memory budget can count: set them, or --max-memory-per-key 0")
	}
	if c.MaxBytesPerOwner == ShareOfMemory {
		c.MaxBytesPerOwner = 0
		ram, err := AvailableMemory()
		if err != nil {
			return "the memory available is unknown here, so keys have no memory budget (set --max-memory-per-key)", nil
		}
		c.MaxBytesPerOwner = ram / int64(max(c.Owners, 1))
		if c.MaxBytesPerOwner < one {
			c.MaxBytesPerOwner = one
			return fmt.Sprintf("each key's memory budget (--max-memory-per-key) is raised to %s, one default sandbox's memory and disk: the memory available divided by the %d keys is less",
				spec.FormatSize(one), c.Owners), nil
		}
		return "", nil
	}
	if c.MaxBytesPerOwner > 0 && one > c.MaxBytesPerOwner {
		return "", fmt.Errorf("--max-memory-per-key %s is less than the %s of memory and disk one sandbox with the default limits takes: raise it, or lower --max-memory or --max-disk",
			spec.FormatSize(c.MaxBytesPerOwner), spec.FormatSize(one))
	}
	return "", nil
}

// charge is what a sandbox with limits l counts against its owner's
// memory budget: its memory and its disk (a tmpfs, so memory too), or -1
// for no bound when either is unlimited.
func charge(l spec.Limits) int64 {
	if l.MemoryBytes == 0 || l.DiskBytes == 0 {
		return -1
	}
	return l.MemoryBytes + l.DiskBytes
}

// charge is what a sandbox with limits l counts against its owner's
// budget: nothing when there is no budget (which also admits unbounded
// limits).
func (m *Manager) charge(l spec.Limits) int64 {
	if m.cfg.MaxBytesPerOwner == 0 {
		return 0
	}
	return charge(l)
}

// checkBudget refuses, as invalid, limits that alone exceed the per-owner
// budget, which no waiting could make fit; acquire refuses the rest with
// ErrTooMany.
func (m *Manager) checkBudget(l spec.Limits) error {
	b := m.cfg.MaxBytesPerOwner
	switch n := charge(l); {
	case b == 0:
		return nil
	case n < 0:
		return fmt.Errorf("%w: memory and disk must both be bounded: this server caps what one key holds at %s (set by --max-memory-per-key)", spec.ErrInvalid, spec.FormatSize(b))
	case n > b:
		return fmt.Errorf("%w: memory %s plus disk %s is above %s, what one key may hold on this server (set by --max-memory-per-key): ask for less",
			spec.ErrInvalid, spec.FormatSize(l.MemoryBytes), spec.FormatSize(l.DiskBytes), spec.FormatSize(b))
	}
	return nil
}

// keptDisk is what dead or snapshotted session s still holds of its
// owner's budget: the disk of its workspace, when one is kept (a tmpfs
// of that size), or its snapshot's charge (snapshot.Stats.Charge).
func (m *Manager) keptDisk(s *session) int64 {
	if s.snap != "" && m.cfg.MaxBytesPerOwner > 0 {
		return s.snapCharge()
	}
	if s.ws == "" || m.cfg.MaxBytesPerOwner == 0 {
		return 0
	}
	return s.spec.Limits.DiskBytes
}

// allowed checks a revived session's spec as a create's is checked
// (without its template, found again by name at its resume): a former
// server's may be past this one's ceilings or rules.
func (m *Manager) allowed(s spec.Spec) error {
	if err := s.ValidateSandbox(); err != nil {
		return err
	}
	return m.checkCeilings(s.Limits)
}

// checkCeilings is Ceilings.Check, a refusal naming the backend's bound
// where Fit lowered the ceiling to one.
func (m *Manager) checkCeilings(l spec.Limits) error {
	err := m.cfg.Ceilings.Check(l)
	var ce *spec.CeilingError
	if errors.As(err, &ce) {
		ce.SetBy = m.cfg.hardBounds[ce.Field.Name]
	}
	return err
}
