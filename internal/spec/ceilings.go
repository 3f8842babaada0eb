package spec

import (
	"fmt"
	"strconv"
	"time"
)

// Ceilings are an operator's upper bounds on the Limits a tenant may ask
// for: Validate keeps a limit inside what any host could honour, Ceilings
// inside what this host's operator will give one sandbox. A zero field
// sets no ceiling; a limit of zero ("none") is above every ceiling set.
type Ceilings Limits

// CeilingField is one limit a ceiling can bound, named as error messages
// and the operator's flag name it. CeilingFields is the one list of them:
// the check and the flags of `warden serve` and `warden mcp` are built
// from it.
type CeilingField struct {
	// Name is the limit as messages name it ("memory").
	Name string
	// Flag is the operator's flag that sets the ceiling ("max-memory").
	Flag string
	// Usage says what the flag bounds, for --help.
	Usage string
	// Field points at the limit in l: an *int64 (a size if Size is set,
	// else a count), *float64 (cores) or *time.Duration.
	Field func(l *Limits) any
	// Size marks an *int64 field counted in bytes.
	Size bool
}

// timeoutCeiling also bounds each exec's own timeout (CheckTimeout).
var timeoutCeiling = CeilingField{"timeout", "max-timeout", "longest timeout a sandbox, session or exec may ask for",
	func(l *Limits) any { return &l.Timeout }, false}

// CeilingFields lists every limit a ceiling bounds, in the order they are
// checked.
var CeilingFields = []CeilingField{
	timeoutCeiling,
	{"memory", "max-memory", "most memory a sandbox may ask for", func(l *Limits) any { return &l.MemoryBytes }, true},
	{"disk", "max-disk", "largest writable disk a sandbox may ask for", func(l *Limits) any { return &l.DiskBytes }, true},
	{"cpus", "max-cpus", "most CPU cores a sandbox may ask for", func(l *Limits) any { return &l.CPUs }, false},
	{"pids", "max-pids", "most processes and threads a sandbox may ask for", func(l *Limits) any { return &l.Pids }, false},
	{"open files", "max-open-files", "most open files per process a sandbox may ask for", func(l *Limits) any { return &l.OpenFiles }, false},
	{"output", "max-output", "most output per stream an exec may ask to keep", func(l *Limits) any { return &l.OutputBytes }, true},
	{"file size", "max-file-size", "largest file a sandbox may ask to write", func(l *Limits) any { return &l.FileSizeBytes }, true},
	{"cpu time", "max-cpu-time", "most CPU time per process a sandbox may ask for", func(l *Limits) any { return &l.CPUTime }, false},
}

// Check refuses the first limit of l above its ceiling with one line that
// names the limit, the value asked for, the ceiling and the flag that sets
// it. The error wraps ErrInvalid: the request, not the server, is wrong.
func (c *Ceilings) Check(l Limits) error {
	ceil := Limits(*c)
	for _, f := range CeilingFields {
		if err := f.check(f.Field(&l), f.Field(&ceil)); err != nil {
			return err
		}
	}
	return nil
}

// CheckTimeout refuses an exec's own timeout above the timeout ceiling;
// zero asks for the session's, which Check has already bounded.
func (c *Ceilings) CheckTimeout(d time.Duration) error {
	if d == 0 {
		return nil
	}
	return timeoutCeiling.check(&d, &c.Timeout)
}

func (f CeilingField) check(value, ceiling any) error {
	v, max := f.number(value), f.number(ceiling)
	if max == 0 || (v > 0 && v <= max) {
		return nil
	}
	asked := f.format(value)
	if v == 0 {
		asked = "0 (no limit)"
	}
	return invalid("%s %s is above this server's ceiling of %s (set by --%s): ask for at most %s",
		f.Name, asked, f.format(ceiling), f.Flag, f.format(ceiling))
}

func (f CeilingField) number(p any) float64 {
	switch p := p.(type) {
	case *int64:
		return float64(*p)
	case *float64:
		return *p
	case *time.Duration:
		return float64(*p)
	}
	panic(fmt.Sprintf("spec: ceiling %s has a field of type %T", f.Name, p))
}

func (f CeilingField) format(p any) string {
	switch p := p.(type) {
	case *int64:
		if f.Size {
			return FormatSize(*p)
		}
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'f', -1, 64)
	case *time.Duration:
		return p.String()
	}
	panic(fmt.Sprintf("spec: ceiling %s has a field of type %T", f.Name, p))
}
