package metrics

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func text(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return b.String()
}

func mustRegister(t *testing.T, r *Registry, cs ...Collector) {
	t.Helper()
	if err := r.Register(cs...); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

func TestExposition(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *Registry)
		want  string
	}{
		{"empty registry", func(*Registry) {}, ""},
		{"unused vector is left out", func(r *Registry) {
			_ = r.Register(NewCounterVec("a_total", "A.", "x"))
		}, ""},
		{"counter without labels", func(r *Registry) {
			c := NewCounterVec("a_total", "A.")
			_ = r.Register(c)
			c.With().Add(2.5)
		}, "# HELP a_total A.\n# TYPE a_total counter\na_total 2.5\n"},
		{"families by name, samples by label values", func(r *Registry) {
			c := NewCounterVec("b_total", "B.", "x", "y")
			g := NewGaugeFunc("a", "A.", []string{"s"}, func() []Sample {
				return []Sample{{[]string{"z"}, 1}, {[]string{"m"}, -2}}
			})
			_ = r.Register(c, g)
			c.With("2", "a").Inc()
			c.With("1", "b").Inc()
			c.With("1", "a").Add(3)
			c.With("1", "b").Inc()
		}, `# HELP a A.
# TYPE a gauge
a{s="m"} -2
a{s="z"} 1
# HELP b_total B.
# TYPE b_total counter
b_total{x="1",y="a"} 3
b_total{x="1",y="b"} 2
b_total{x="2",y="a"} 1
`},
		{"histogram", func(r *Registry) {
			h := NewHistogramVec("d_seconds", "D.", []float64{0.5, 1, math.Inf(1)}, "k")
			_ = r.Register(h)
			for _, v := range []float64{0.5, 0.75, 3} {
				h.With("x").Observe(v)
			}
		}, `# HELP d_seconds D.
# TYPE d_seconds histogram
d_seconds_bucket{k="x",le="0.5"} 1
d_seconds_bucket{k="x",le="1"} 2
d_seconds_bucket{k="x",le="+Inf"} 3
d_seconds_sum{k="x"} 4.25
d_seconds_count{k="x"} 3
`},
		{"histogram without labels", func(r *Registry) {
			h := NewHistogramVec("d", "D.", []float64{1})
			_ = r.Register(h)
			h.With()
		}, "# HELP d D.\n# TYPE d histogram\nd_bucket{le=\"1\"} 0\nd_bucket{le=\"+Inf\"} 0\nd_sum 0\nd_count 0\n"},
		{"special values", func(r *Registry) {
			_ = r.Register(NewGaugeFunc("g", "G.", []string{"v"}, func() []Sample {
				return []Sample{{[]string{"a"}, math.Inf(1)}, {[]string{"b"}, math.Inf(-1)}, {[]string{"c"}, math.NaN()}, {[]string{"d"}, 1e21}}
			}))
		}, "# HELP g G.\n# TYPE g gauge\ng{v=\"a\"} +Inf\ng{v=\"b\"} -Inf\ng{v=\"c\"} NaN\ng{v=\"d\"} 1e+21\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			tt.setup(r)
			if got := text(t, r); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestEscaping(t *testing.T) {
	tests := []struct{ help, value, want string }{
		{"plain", "v", "# HELP e plain\n# TYPE e counter\ne{l=\"v\"} 1\n"},
		{`back\slash "quoted"`, `a\b`, "# HELP e back\\\\slash \"quoted\"\n# TYPE e counter\ne{l=\"a\\\\b\"} 1\n"},
		{"two\nlines", "say \"hi\"\nbye", "# HELP e two\\nlines\n# TYPE e counter\ne{l=\"say \\\"hi\\\"\\nbye\"} 1\n"},
		{"bad utf-8", "a\xffb", "# HELP e bad utf-8\n# TYPE e counter\ne{l=\"a\uFFFDb\"} 1\n"},
	}
	for _, tt := range tests {
		r := NewRegistry()
		c := NewCounterVec("e", tt.help, "l")
		mustRegister(t, r, c)
		c.With(tt.value).Inc()
		if got := text(t, r); got != tt.want {
			t.Errorf("help %q, value %q: got\n%s\nwant\n%s", tt.help, tt.value, got, tt.want)
		}
	}
}

func TestChildKeyIsUnambiguous(t *testing.T) {
	c := NewCounterVec("k", "K.", "a", "b")
	c.With("1:x", "").Inc()
	c.With("1", "x").Inc()
	if n := len(c.sorted()); n != 2 {
		t.Errorf("two label sets share a child: %d children", n)
	}
}

func TestHistogramBuckets(t *testing.T) {
	h := NewHistogramVec("h", "H.", []float64{1, 2, 5})
	tests := []struct {
		v    float64
		want []uint64 // cumulative, +Inf last
	}{
		{0, []uint64{1, 1, 1, 1}},
		{1, []uint64{2, 2, 2, 2}},   // a bound belongs to its bucket
		{1.5, []uint64{2, 3, 3, 3}}, // between bounds
		{5, []uint64{2, 3, 4, 4}},   // the last bound
		{100, []uint64{2, 3, 4, 5}}, // above every bound
		{-1, []uint64{3, 4, 5, 6}},  // below every bound
	}
	for _, tt := range tests {
		h.With().Observe(tt.v)
		counts, _ := h.With().snapshot()
		var cum uint64
		for i, n := range counts {
			cum += n
			if cum != tt.want[i] {
				t.Errorf("after %v: bucket %d = %d, want %d", tt.v, i, cum, tt.want[i])
			}
		}
	}
	if _, sum := h.With().snapshot(); sum != 106.5 {
		t.Errorf("sum %v, want 106.5", sum)
	}
}

func TestRegisterRefusesDuplicates(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, NewCounterVec("a", "A."))
	if err := r.Register(NewCounterVec("b", "B."), NewCounterVec("a", "A again.")); err == nil {
		t.Fatal("a second family named a was registered")
	}
	if err := r.Register(NewCounterVec("c", "C."), NewCounterVec("c", "C.")); err == nil {
		t.Fatal("a name repeated in one call was registered")
	}
	if err := r.Register(NewCounterVec("b", "B.")); err != nil {
		t.Errorf("a failed Register left b behind: %v", err)
	}
}

func TestInvalidDefinitionsPanic(t *testing.T) {
	tests := map[string]func(){
		"empty name":         func() { NewCounterVec("", "") },
		"name starts digit":  func() { NewCounterVec("1a", "") },
		"name has dash":      func() { NewCounterVec("a-b", "") },
		"label has colon":    func() { NewCounterVec("a", "", "b:c") },
		"reserved label":     func() { NewCounterVec("a", "", "__x") },
		"repeated label":     func() { NewCounterVec("a", "", "x", "x") },
		"histogram le label": func() { NewHistogramVec("a", "", []float64{1}, "le") },
		"unsorted buckets":   func() { NewHistogramVec("a", "", []float64{2, 1}) },
		"NaN bucket":         func() { NewHistogramVec("a", "", []float64{math.NaN()}) },
		"wrong label count":  func() { NewCounterVec("a", "", "x").With() },
		"negative counter":   func() { NewCounterVec("a", "").With().Add(-1) },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("did not panic")
				}
			}()
			f()
		})
	}
	for _, ok := range []string{"a", "_a", "a:b_1", "A"} {
		NewCounterVec(ok, "", "b_1", "_x")
	}
}

func TestMalformedGaugeFailsTheScrape(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, NewCounterVec("a", "A."), NewGaugeFunc("g", "G.", []string{"x"}, func() []Sample {
		return []Sample{{Value: 1}}
	}))
	var b strings.Builder
	if _, err := r.WriteTo(&b); err == nil || b.Len() > 0 {
		t.Errorf("WriteTo wrote %q, err %v; want nothing and an error", b.String(), err)
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("ServeHTTP answered %d, want 500", rec.Code)
	}
}

func TestServeHTTP(t *testing.T) {
	r := NewRegistry()
	c := NewCounterVec("a_total", "A.")
	mustRegister(t, r, c)
	c.With().Inc()
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Errorf("Content-Type %q, want %q", ct, ContentType)
	}
	if want := "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"; rec.Body.String() != want {
		t.Errorf("body %q, want %q", rec.Body.String(), want)
	}
}

func TestProcessMetrics(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, ProcessMetrics()...)
	out := text(t, r)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_start_time_seconds"} {
		if !strings.Contains(out, "\n"+name+" ") {
			t.Errorf("no sample of %s in\n%s", name, out)
		}
	}
	start, err := processStart()
	if err != nil {
		t.Fatalf("processStart: %v", err)
	}
	// The test binary started within the last hour, and not in the future.
	if now := float64(time.Now().Unix()); start > now+1 || start < now-3600 {
		t.Errorf("process start %v is not close to now %v", start, now)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := NewRegistry()
	c := NewCounterVec("c_total", "C.", "k")
	h := NewHistogramVec("h", "H.", []float64{1, 2}, "k")
	mustRegister(t, r, c, h)
	const workers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := []string{"even", "odd"}[w%2]
			for i := range each {
				c.With(k).Inc()
				h.With(k).Observe(float64(i % 3))
				if i%100 == 0 {
					if _, err := r.WriteTo(io.Discard); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	out := text(t, r)
	for _, want := range []string{
		`c_total{k="even"} 4000`, `c_total{k="odd"} 4000`,
		`h_count{k="even"} 4000`, `h_bucket{k="odd",le="+Inf"} 4000`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
