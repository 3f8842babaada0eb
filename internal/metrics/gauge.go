package metrics

import (
	"fmt"
	"slices"
)

// Sample is one value of a GaugeFunc (or counter func), with its label values in the order
// of the family's label names.
type Sample struct {
	LabelValues []string
	Value       float64
}

// GaugeFunc is a gauge family whose samples a function reads at scrape
// time, for figures another component already keeps (sessions by state),
// so they are never stale and that component needs no hook into metrics.
type GaugeFunc struct {
	*desc
	read func() []Sample
}

// NewGaugeFunc builds a gauge family that calls read on every scrape;
// register it to expose it. read must be safe for concurrent use. It
// panics on an invalid metric or label name.
func NewGaugeFunc(name, help string, labels []string, read func() []Sample) *GaugeFunc {
	return &GaugeFunc{desc: newDesc(name, help, "gauge", labels), read: read}
}

// NewCounterFunc builds a counter family whose samples read gives on
// every scrape, for counts another component already keeps; read must
// never give a smaller value than before. It is a GaugeFunc in all but
// the type it declares.
func NewCounterFunc(name, help string, labels []string, read func() []Sample) *GaugeFunc {
	return &GaugeFunc{desc: newDesc(name, help, "counter", labels), read: read}
}

// appendSamples writes read's samples ordered by label values. Samples
// with the wrong number of label values fail the scrape, not the process.
func (g *GaugeFunc) appendSamples(b []byte) ([]byte, error) {
	samples := slices.Clone(g.read())
	for _, s := range samples {
		if len(s.LabelValues) != len(g.labels) {
			return nil, fmt.Errorf("%d label values for %d labels", len(s.LabelValues), len(g.labels))
		}
	}
	slices.SortFunc(samples, func(a, b Sample) int { return slices.Compare(a.LabelValues, b.LabelValues) })
	for _, s := range samples {
		b = appendSample(b, g.name, g.labels, s.LabelValues, "", s.Value)
	}
	return b, nil
}
