package connlimit

import "github.com/warden-sandbox/warden/internal/metrics"

// Collectors are l's Prometheus series, read from its Stats at scrape
// time: connections held and the cap, and the evictions and refusals
// that say the cap is being reached.
func (l *Listener) Collectors() []metrics.Collector {
	one := func(v func(Stats) float64) func() []metrics.Sample {
		return func() []metrics.Sample { return []metrics.Sample{{Value: v(l.Stats())}} }
	}
	return []metrics.Collector{
		metrics.NewGaugeFunc("warden_connections", "Client connections held, by state (open: all of them).", []string{"state"},
			func() []metrics.Sample {
				return []metrics.Sample{{LabelValues: []string{"open"}, Value: float64(l.Stats().Open)}}
			}),
		metrics.NewGaugeFunc("warden_connections_max", "Client connections held at most, below the descriptor limit minus the sandboxes' reserve.", nil,
			one(func(s Stats) float64 { return float64(s.Max) })),
		metrics.NewCounterFunc("warden_connections_evicted_total", "Connections without a tenant's request in flight closed to make room for a new one.", nil,
			one(func(s Stats) float64 { return float64(s.Evicted) })),
		metrics.NewCounterFunc("warden_connections_refused_total", "New connections answered 503 and closed because every other one served a tenant's request.", nil,
			one(func(s Stats) float64 { return float64(s.Refused) })),
	}
}
