package spec

import (
	"fmt"
	"math"
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

// CeilingError is a limit above its ceiling: which limit, the value
// asked for, the ceiling and the flag that sets it, so each front end can
// word the refusal for whoever can act on it (a client's request, an
// operator's flags). It wraps ErrInvalid.
type CeilingError struct {
	Field          CeilingField
	Value, Ceiling string
	// Unlimited says the value asked for was 0, no limit at all.
	Unlimited bool
	// SetBy, when set, names what set the ceiling instead of the flag
	// (a bound of the host the flag was lowered to).
	SetBy string
}

// Error words the refusal for a client, who can only ask for less.
func (e *CeilingError) Error() string {
	by := "--" + e.Field.Flag
	if e.SetBy != "" {
		by = e.SetBy
	}
	return fmt.Sprintf("%v: %s %s is above this server's ceiling of %s (set by %s): ask for at most %s",
		ErrInvalid, e.Field.Name, e.asked(), e.Ceiling, by, e.Ceiling)
}

// Unwrap makes the error ErrInvalid: the request, not the server, is wrong.
func (e *CeilingError) Unwrap() error { return ErrInvalid }

func (e *CeilingError) asked() string {
	if e.Unlimited {
		return "0 (no limit)"
	}
	return e.Value
}

// Check refuses the first limit of l above its ceiling with a
// *CeilingError, one line that names the limit, the value asked for, the
// ceiling and the flag that sets it.
func (c *Ceilings) Check(l Limits) error {
	ceil := Limits(*c)
	for _, f := range CeilingFields {
		if err := f.check(f.Field(&l), f.Field(&ceil)); err != nil {
			return err
		}
	}
	return nil
}

// Clamp lowers each limit of l above its ceiling (0, no limit, included)
// to the ceiling, and returns what it lowered, so an operator's defaults
// always fit the operator's ceilings.
func (c *Ceilings) Clamp(l Limits) (Limits, []*CeilingError) {
	ceil := Limits(*c)
	var clamped []*CeilingError
	for _, f := range CeilingFields {
		if err := f.check(f.Field(&l), f.Field(&ceil)); err != nil {
			clamped = append(clamped, err)
			f.set(f.Field(&l), f.Field(&ceil))
		}
	}
	return l, clamped
}

// Validate refuses ceilings that make no sense: negative, NaN or infinite
// ones, and a timeout ceiling under a second, which no request (in whole
// seconds) could fit. Each message names the flag.
func (c *Ceilings) Validate() error {
	l := Limits(*c)
	for _, f := range CeilingFields {
		if v := f.number(f.Field(&l)); v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("--%s %s is not a ceiling: use a positive value, or 0 for no ceiling", f.Flag, f.format(f.Field(&l)))
		}
	}
	if c.Timeout > 0 && c.Timeout < time.Second {
		return fmt.Errorf("--max-timeout %s is too short: requests ask for whole seconds, so use at least 1s (or 0 for no ceiling)", c.Timeout)
	}
	return nil
}

// CheckTimeout refuses an exec's own timeout above the timeout ceiling;
// zero asks for the session's, which Check has already bounded.
func (c *Ceilings) CheckTimeout(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if err := timeoutCeiling.check(&d, &c.Timeout); err != nil {
		return err // not the nil *CeilingError, which is a non-nil error
	}
	return nil
}

// check returns a *CeilingError if value is above ceiling, else nil.
func (f CeilingField) check(value, ceiling any) *CeilingError {
	v, max := f.number(value), f.number(ceiling)
	if max == 0 || (v > 0 && v <= max) {
		return nil
	}
	return &CeilingError{Field: f, Value: f.format(value), Ceiling: f.format(ceiling), Unlimited: v == 0}
}

// set copies the limit at from to the one at to, both f.Field's type.
func (f CeilingField) set(to, from any) {
	switch to := to.(type) {
	case *int64:
		*to = *from.(*int64)
	case *float64:
		*to = *from.(*float64)
	case *time.Duration:
		*to = *from.(*time.Duration)
	}
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
