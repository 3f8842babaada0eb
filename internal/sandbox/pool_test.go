package sandbox

import (
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestPoolHoldsRefillDuringMisses: a take of the pool's spec that finds
// it empty holds the refill back until its caller says its own build or
// run has ended (twice changes nothing), so a burst larger than the pool
// runs on one-shot builds instead of pooled boxes built only to be taken
// at once; a hit, or a spec the pool does not build, holds nothing, and a
// closed pool never waits. A miss holds it for missHold at most.
func TestPoolHoldsRefillDuringMisses(t *testing.T) {
	pooledSpec := spec.Spec{Limits: spec.DefaultLimits}
	other := spec.Spec{Limits: spec.Limits{MemoryBytes: 1}}
	tests := []struct {
		name      string
		boxes     int
		take      spec.Spec
		closeIt   bool
		wantQuiet bool // while the caller's work is in flight
	}{
		{"hit", 1, pooledSpec, false, true},
		{"empty", 0, pooledSpec, false, false},
		{"another spec", 0, other, false, true},
		{"empty, then closed", 0, pooledSpec, true, true},
	}
	for _, tt := range tests {
		p := &pool{spec: pooledSpec, size: 1, want: make(chan struct{}, 1)}
		for i := 0; i < tt.boxes; i++ {
			p.boxes = append(p.boxes, pooled{box: &fakeBox{done: make(chan struct{})}})
		}
		_, _, ended := p.take(tt.take)
		if tt.closeIt {
			p.closed = true
		}
		now := time.Now()
		if got := p.quiet(now); got != tt.wantQuiet {
			t.Errorf("%s: quiet while the caller works = %v, want %v", tt.name, got, tt.wantQuiet)
		}
		if !p.quiet(now.Add(missHold)) {
			t.Errorf("%s: not quiet missHold after the miss, want quiet", tt.name)
		}
		ended()
		ended()
		if !p.quiet(now) || p.misses != 0 {
			t.Errorf("%s: after ended, quiet = %v with %d misses, want quiet with none", tt.name, p.quiet(now), p.misses)
		}
	}
}
