package metrics

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// HistogramVec is a family of histograms with fixed buckets, one per
// combination of label values, for durations and sizes whose
// distribution matters more than their mean.
type HistogramVec struct {
	vec[Histogram]
	les []string // upper bounds as written in the le label
}

// NewHistogramVec builds a histogram family with the given bucket upper
// bounds; register it to expose it. The +Inf bucket is always added, so
// buckets need not end with it. It panics on an invalid name, on the
// reserved label "le", and on bounds that are not strictly increasing.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	upper := slices.Clone(buckets)
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], 1) {
		upper = upper[:n-1]
	}
	les := make([]string, len(upper))
	for i, u := range upper {
		if math.IsNaN(u) || i > 0 && u <= upper[i-1] {
			panic(fmt.Sprintf("metrics: %s: buckets %v are not strictly increasing", name, buckets))
		}
		les[i] = string(appendFloat(nil, u))
	}
	h := &HistogramVec{les: les}
	h.vec = vec[Histogram]{
		desc: newDesc(name, help, "histogram", labels, "le"),
		newChild: func() *Histogram {
			return &Histogram{upper: upper, counts: make([]uint64, len(upper)+1)}
		},
	}
	return h
}

// With returns the histogram for the label values, in the order of the
// family's label names, creating it empty on first use. It panics when
// the number of values is wrong.
func (v *HistogramVec) With(values ...string) *Histogram { return v.with(values) }

// appendSamples writes each child's buckets cumulatively, as the format
// requires, then +Inf, _sum and _count.
func (v *HistogramVec) appendSamples(b []byte) ([]byte, error) {
	for _, c := range v.sorted() {
		counts, sum := c.metric.snapshot()
		var total uint64
		for i, n := range counts {
			total += n
			le := "+Inf"
			if i < len(v.les) {
				le = v.les[i]
			}
			b = appendSample(b, v.name+"_bucket", v.labels, c.values, le, float64(total))
		}
		b = appendSample(b, v.name+"_sum", v.labels, c.values, "", sum)
		b = appendSample(b, v.name+"_count", v.labels, c.values, "", float64(total))
	}
	return b, nil
}

// Histogram counts observations into buckets. A mutex rather than atomics
// keeps a scrape's buckets, sum and count consistent with each other.
type Histogram struct {
	upper []float64

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
}

// Observe records v in the first bucket whose upper bound is at least v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.mu.Unlock()
}

func (h *Histogram) snapshot() ([]uint64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.counts), h.sum
}
