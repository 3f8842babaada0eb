package vmbox

import (
	"time"

	"github.com/warden-sandbox/warden/internal/microvm"
)

// phases times the steps of a box's start, in order: where a cold boot's
// time goes (issue 21's budget is one second to the first exec). Start
// logs them at debug level (`warden serve --verbose`), and BenchmarkStart
// reports their medians.
type phases struct {
	last  time.Time
	steps []phase
	// vm is the launcher's own split of the "boot" step: the guest
	// kernel to /init by its clock, /init to its hello, QEMU's start to
	// the hello on the host's.
	vm microvm.Boot
}

// phase is one step's name and how long it took.
type phase struct {
	name string
	took time.Duration
}

// newPhases starts timing now.
func newPhases() *phases { return &phases{last: time.Now()} }

// mark ends the step called name: it took the time since the last mark.
func (p *phases) mark(name string) {
	now := time.Now()
	p.steps = append(p.steps, phase{name, now.Sub(p.last)})
	p.last = now
}

// attrs are the steps and the VM's split as slog attributes, in
// milliseconds, for one log line.
func (p *phases) attrs() []any {
	a := make([]any, 0, 2*len(p.steps)+6)
	for _, s := range p.steps {
		a = append(a, s.name+"_ms", ms(s.took))
	}
	return append(a, "qemu_to_hello_ms", ms(p.vm.ToHello), "kernel_to_init_ms", ms(p.vm.KernelToInit), "init_to_hello_ms", ms(p.vm.InitToHello))
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
