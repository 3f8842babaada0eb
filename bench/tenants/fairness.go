package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/bench/wardenserve"
)

// FairRow is key A's `1+1` exec latency with no attack or under one
// attack of key B.
type FairRow struct {
	Attack  string    `json:"attack"`
	Samples []float64 `json:"samples_ms,omitempty"`
	P50     float64   `json:"p50_ms"`
	P90     float64   `json:"p90_ms"`
	P99     float64   `json:"p99_ms"`
	Errors  int       `json:"errors"`
	// ErrorMS are how long the failed execs took.
	ErrorMS []float64 `json:"error_ms,omitempty"`
	// LastError is the last error A saw, if any.
	LastError string `json:"last_error,omitempty"`
	// Ratio is P50 over the unloaded P50.
	Ratio float64 `json:"ratio,omitempty"`
	// Pass: within fairRatio of unloaded, and no errors (attacks only).
	Pass bool `json:"pass"`
	// Baseline marks an unloaded row, which has no target.
	Baseline bool   `json:"baseline,omitempty"`
	Note     string `json:"note,omitempty"`
	// Skipped says why the attack could not be mounted.
	Skipped string `json:"skipped,omitempty"`
}

// fairRatio is the target: A's p50 under attack at most this many times
// its unloaded p50.
const fairRatio = 3

// attack is one hostile pattern of key B. start mounts it and returns
// once it is in force; stop ends it, cleans up and says what it did.
type attack struct {
	name  string
	start func(ctx context.Context, e *env) (stop func() string, err error)
}

// env is what an attack works with.
type env struct {
	t *tenants
	o options
	// window is how long A measures while the attack is in force; an
	// attack's own programs last window plus slack.
	window time.Duration
}

// programSecs is how long an attack's programs run: past the
// measurement, never much longer.
func (e *env) programSecs() float64 { return (e.window + 5*time.Second).Seconds() }

// fairness measures A's exec latency unloaded, under each attack, and
// unloaded again at the end (the drift of the machine).
func fairness(o options, t *tenants) ([]FairRow, error) {
	id, err := t.a.Create(nil)
	if err != nil {
		return nil, fmt.Errorf("creating key A's session: %w", err)
	}
	defer t.a.Remove(id)
	for i := 0; i < 3; i++ {
		if err := t.a.Python(id, "1"); err != nil {
			return nil, fmt.Errorf("warming key A's session: %w", err)
		}
	}
	e := &env{t: t, o: o, window: o.window}
	base := probe(t.a, id, o.window, o.probeMax)
	base.Attack, base.Baseline = "none (unloaded)", true
	rows := []FairRow{base}
	for _, a := range attacks() {
		if !o.wantsAttack(a.name) {
			continue
		}
		log.Printf("fairness: %s", a.name)
		rows = append(rows, underAttack(e, a, id))
	}
	end := probe(t.a, id, o.window, o.probeMax)
	end.Attack, end.Baseline = "none (unloaded, at the end)", true
	rows = append(rows, end)
	for i := range rows {
		if rows[i].Skipped == "" && base.P50 > 0 {
			rows[i].Ratio = rows[i].P50 / base.P50
			rows[i].Pass = !rows[i].Baseline && rows[i].Ratio <= fairRatio && rows[i].Errors == 0 && len(rows[i].Samples) > 0
		}
	}
	return rows, nil
}

// settle is the pause after an attack ends, so its cleanup does not
// count against the next.
const settle = time.Second

func underAttack(e *env, a attack, id string) FairRow {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, err := a.start(ctx, e)
	if err != nil {
		return FairRow{Attack: a.name, Skipped: err.Error()}
	}
	row := probe(e.t.a, id, e.window, e.o.probeMax)
	cancel()
	row.Attack = a.name
	row.Note = stop()
	time.Sleep(settle)
	return row
}

// probePace is how often A starts an exec: a tenant at work, not a
// load generator of its own.
const probePace = 20 * time.Millisecond

// probe runs `1+1` in A's session, one exec every probePace (or after
// the last one, when slower), for window (at most max execs), and sums
// up the latencies.
func probe(c *wardenserve.Client, id string, window time.Duration, max int) FairRow {
	var row FairRow
	for start := time.Now(); time.Since(start) < window && len(row.Samples)+row.Errors < max; {
		t0 := time.Now()
		if err := onePlusOne(c, id); err != nil {
			row.Errors++
			row.ErrorMS = append(row.ErrorMS, measure.MS(time.Since(t0)))
			row.LastError = err.Error()
		} else {
			row.Samples = append(row.Samples, measure.MS(time.Since(t0)))
		}
		time.Sleep(time.Until(t0.Add(probePace)))
	}
	row.P50, row.P90, row.P99 = measure.Pct(row.Samples, 50), measure.Pct(row.Samples, 90), measure.Pct(row.Samples, 99)
	return row
}

// onePlusOne is A's exec, failing unless it answers 2.
func onePlusOne(c *wardenserve.Client, id string) error {
	var r struct {
		wardenserve.Result
		Value string `json:"value"`
	}
	err := c.Post("/v1/sessions/"+id+"/exec", map[string]any{"language": "python", "code": "1+1"}, &r)
	if err == nil && (r.ExitCode != 0 || r.Error != "" || r.Value != "2") {
		err = fmt.Errorf("exit %d, value %q, error %q", r.ExitCode, r.Value, r.Error)
	}
	return err
}

// loop runs f in n goroutines until ctx ends; wait waits for them.
func loop(ctx context.Context, n int, f func(ctx context.Context, i int)) (wait func()) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f(ctx, i)
			}
		}()
	}
	return wg.Wait
}
