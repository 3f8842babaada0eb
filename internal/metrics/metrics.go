// Package metrics exposes counters, gauges and histograms in the
// Prometheus text exposition format, version 0.0.4, for `warden serve`.
//
// It replaces github.com/prometheus/client_golang, whose package
// initialisation (with procfs, protobuf, client_model, expvar and
// runtime/metrics) every warden process would pay, and a sandbox's start
// too when warden runs itself as the init, for a metrics stack only the
// server uses (docs/performance.md has the figures). This package does no work at init
// and covers only what the server needs: labelled counters and
// histograms, gauges read at scrape time and a few process figures.
//
// Names are checked when a metric is built, which panics on an invalid
// one: names are constants, so that is a programmer error. Output is
// deterministic, ordered by metric name and then by label values.
package metrics

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
)

// ContentType is the media type of the text exposition format 0.0.4,
// which every Prometheus server scrapes without negotiation.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Collector is a metric family a Registry can expose: a *CounterVec, a
// *HistogramVec or a *GaugeFunc. Its methods are unexported so that only
// this package's kinds qualify, which keeps the output well-formed.
type Collector interface {
	family() *desc
	appendSamples(b []byte) ([]byte, error)
}

// Registry is a set of metric families with unique names, and what a
// /metrics endpoint serves. It is safe for concurrent use; the zero value
// is empty and ready.
type Registry struct {
	mu         sync.Mutex
	collectors []Collector // sorted by name
}

// NewRegistry returns an empty Registry. A registry of its own per server
// keeps two servers in one process (tests) from colliding on names.
func NewRegistry() *Registry { return &Registry{} }

// Register adds cs to r. It adds none of them and answers an error when a
// name is already registered or repeated in cs, since two families of one
// name would make the output ambiguous.
func (r *Registry) Register(cs ...Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := slices.Clone(r.collectors)
	for _, c := range cs {
		name := c.family().name
		i, found := slices.BinarySearchFunc(all, name, func(c Collector, name string) int {
			return cmp.Compare(c.family().name, name)
		})
		if found {
			return fmt.Errorf("metrics: %s registered twice", name)
		}
		all = slices.Insert(all, i, c)
	}
	r.collectors = all
	return nil
}

// WriteTo writes every family with at least one sample in the text
// format, each with its HELP and TYPE lines. It writes nothing when a
// gauge function answers malformed samples, so a scrape never sees half a
// page.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	b, err := r.appendText(nil)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// ServeHTTP answers with the registry in the text format, so a Registry
// can be mounted as the /metrics handler. A malformed gauge is a 500.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	b, err := r.appendText(nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	_, _ = w.Write(b) // the client is gone if this fails
}

// appendText renders the registry. Collectors are copied out under the
// lock and read outside it, so a slow gauge function does not hold up
// registration.
func (r *Registry) appendText(b []byte) ([]byte, error) {
	r.mu.Lock()
	cs := r.collectors
	r.mu.Unlock()
	for _, c := range cs {
		mark := len(b)
		b = appendHeader(b, c.family())
		start := len(b)
		var err error
		if b, err = c.appendSamples(b); err != nil {
			return nil, fmt.Errorf("metrics: %s: %w", c.family().name, err)
		}
		if len(b) == start {
			b = b[:mark]
		}
	}
	return b, nil
}
