package metrics

import (
	"fmt"
	"math"
	"sync/atomic"
)

// CounterVec is a family of counters, one per combination of label
// values, for events counted by kind such as execs by outcome.
type CounterVec struct {
	vec[Counter]
}

// NewCounterVec builds a counter family; register it to expose it. It
// panics on an invalid metric or label name.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{vec[Counter]{
		desc:     newDesc(name, help, "counter", labels),
		newChild: func() *Counter { return new(Counter) },
	}}
}

// With returns the counter for the label values, in the order of the
// family's label names, creating it at zero on first use. It panics when
// the number of values is wrong.
func (v *CounterVec) With(values ...string) *Counter { return v.with(values) }

func (v *CounterVec) appendSamples(b []byte) ([]byte, error) {
	for _, c := range v.sorted() {
		b = appendSample(b, v.name, v.labels, c.values, "", c.metric.value())
	}
	return b, nil
}

// Counter is a value that only goes up. It is a float held in an atomic
// word, so the exec path can count from many goroutines without a lock.
type Counter struct {
	bits atomic.Uint64
}

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Add adds d, which must not be negative or NaN: a counter that went down
// would read as a restart to Prometheus.
func (c *Counter) Add(d float64) {
	if d < 0 || math.IsNaN(d) {
		panic(fmt.Sprintf("metrics: counter added %v; counters only go up", d))
	}
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (c *Counter) value() float64 { return math.Float64frombits(c.bits.Load()) }
