package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fakeClock drives a pacer: time moves only when a wait is taken (by the
// wait's length), and every wait is recorded.
type fakeClock struct {
	t     time.Time
	waits []time.Duration
}

func (c *fakeClock) install(p *execPacer) {
	c.t = time.Unix(1000, 0)
	p.now = func() time.Time { return c.t }
	p.after = func(d time.Duration) <-chan time.Time {
		c.waits = append(c.waits, d)
		c.t = c.t.Add(d)
		ch := make(chan time.Time, 1)
		ch <- c.t
		return ch
	}
}

// pacedSession is a session of alice's with default limits whose exec
// pacer runs on a fake clock.
func pacedSession(t *testing.T) (*Manager, Info, *session, *fakeClock) {
	t.Helper()
	m, _ := newTestManager(t, Config{})
	info, s := sessionOf(t, m, "alice")
	clock := &fakeClock{}
	clock.install(s.pace)
	return m, info, s, clock
}

// TestExecPacerWeighsCost: at one core and the default pace, tokens are
// 100 ms of host CPU a second after a burst of 200 execs of code, the
// first starting its interpreter (806);
// a command costs 10, code 4 (what each costs the host when they come one
// at a time, with a margin), and only what goes past the burst waits, for
// its cost's time.
func TestExecPacerWeighsCost(t *testing.T) {
	p := newExecPacer(1, DefaultExecPace)
	var clock fakeClock
	clock.install(p)
	for i := range 200 {
		if d, err := p.wait(context.Background(), execCost(ExecRequest{Language: "python"})); d != 0 || err != nil {
			t.Fatalf("code exec %d of the burst waited %v, %v; want no wait", i, d, err)
		}
		if i == 0 {
			p.charge(interpStartCost)
		}
	}
	command, code := ExecRequest{Command: []string{"true"}}, ExecRequest{Language: "python", Code: "1+1"}
	steps := []struct {
		name    string
		req     ExecRequest
		advance time.Duration
		want    time.Duration
	}{
		{"command past the burst", command, 0, 100 * time.Millisecond},
		{"code past the burst", code, 0, 40 * time.Millisecond},
		{"command after its cost's time", command, 100 * time.Millisecond, 0},
		{"code after a refill to the burst", code, 10 * time.Second, 0},
	}
	for i, st := range steps {
		clock.t = clock.t.Add(st.advance)
		if got, err := p.wait(context.Background(), execCost(st.req)); got != st.want || err != nil {
			t.Errorf("step %d (%s, %v later): waited %v, %v; want %v", i, st.name, st.advance, got, err, st.want)
		}
	}
}

// TestExecPacerOff: a negative or non-finite pace paces nothing, and
// Validate refuses what is not a fraction in range.
func TestExecPacerOff(t *testing.T) {
	for _, pace := range []float64{-1, math.Inf(1)} {
		if p := newExecPacer(1, pace); p != nil {
			t.Errorf("newExecPacer(1, %g) = %+v, want nil (no pacing)", pace, p)
		}
	}
	for _, pace := range []float64{math.NaN(), MaxExecPace + 1} {
		if err := (Config{ExecPace: pace}).Validate(); err == nil || !strings.Contains(err.Error(), "--exec-pace") {
			t.Errorf("Validate() with ExecPace %g = %v, want an error naming --exec-pace", pace, err)
		}
	}
}

// TestExecPacedByQuota sends command execs to a session with the
// smallest CPU quota: the burst runs at once; the next exec waits its
// turn (queued_ms says how long), or, when its deadline comes first,
// fails at once with ErrPaced saying how to avoid it, without running,
// and the session stays usable.
func TestExecPacedByQuota(t *testing.T) {
	m, b := newTestManager(t, Config{})
	opts := defaultOptions()
	opts.Limits.CPUs = spec.MinCPUs
	info, err := m.Create(context.Background(), "alice", opts)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
	var clock fakeClock
	clock.install(s.pace)
	burst := minExecBurst / commandExecCost
	for i := range burst {
		if _, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Command: []string{"true", fmt.Sprint(i)}}, Stream{}); err != nil {
			t.Fatalf("exec %d of the burst = %v", i, err)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), clock.t.Add(500*time.Millisecond))
	defer cancel()
	_, err = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true", "past the burst"}}, Stream{})
	if !errors.Is(err, ErrPaced) || !strings.Contains(err.Error(), "--exec-pace") {
		t.Errorf("exec past the burst with a deadline before its turn = %v, want ErrPaced naming --exec-pace", err)
	}
	b.mu.Lock()
	ran := b.lastExec.ran.Argv
	b.mu.Unlock()
	if ran[1] == "past the burst" {
		t.Error("the exec past the burst ran without waiting")
	}
	if got, _ := m.Get(context.Background(), "alice", info.ID); got.State != StateReady || got.Execs != int64(burst) {
		t.Errorf("session after a refused exec = %s with %d execs, want ready with %d", got.State, got.Execs, burst)
	}
	r, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Command: []string{"true", "queued"}}, Stream{})
	// At 0.01 cores, 1 ms of host CPU a second: the burst of 806 went to
	// 80 commands of 10, and the other 4 tokens of the next come in 4 s.
	if err != nil || r.QueuedMS != 4000 {
		t.Errorf("exec past the burst = queued %v ms, %v; want it to wait 4000 ms", r.QueuedMS, err)
	}
}

// fakeInterp stands for a persistent interpreter: a run starts its
// process when none is live, and "exit 0" ends it, as in bash.
type fakeInterp struct{ live bool }

func (f *fakeInterp) Run(_ context.Context, code string, _, _ io.Writer) (interp.Outcome, error) {
	o := interp.Outcome{Started: !f.live, Restarted: code == "exit 0"}
	f.live = !o.Restarted
	return o, nil
}

func (f *fakeInterp) Close() error { return nil }

// TestExecPacerChargesInterpreterStarts: an exec of code that starts its
// interpreter (the first, or each after user code ended it) costs the
// host a spawn and a handshake, and is charged what a command is; only
// an exec in a live interpreter costs codeExecCost.
func TestExecPacerChargesInterpreterStarts(t *testing.T) {
	tests := []struct {
		name  string
		codes []string
		want  int // tokens taken
	}{
		{"first exec starts it", []string{"1"}, commandExecCost},
		{"then live", []string{"1", "2", "3"}, commandExecCost + 2*codeExecCost},
		{"exit 0 in a loop", []string{"exit 0", "exit 0", "exit 0"}, 3 * commandExecCost},
		{"restart after exit", []string{"1", "exit 0", "2", "3"}, commandExecCost + codeExecCost + commandExecCost + codeExecCost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, info, s, clock := pacedSession(t)
			s.interps = map[string]interp.Interpreter{"bash": &fakeInterp{}}
			before := s.pace.lim.TokensAt(clock.t)
			for _, code := range tt.codes {
				if _, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Language: "bash", Code: code}, Stream{}); err != nil {
					t.Fatalf("exec %q = %v", code, err)
				}
			}
			if got := before - s.pace.lim.TokensAt(clock.t); got != float64(tt.want) {
				t.Errorf("execs %q took %g tokens, want %d", tt.codes, got, tt.want)
			}
		})
	}
}

// TestExecPacerChargesOutput: an exec's output is charged after it, by
// its size, so the next exec waits for what sending it cost the host.
func TestExecPacerChargesOutput(t *testing.T) {
	tests := []struct {
		r        spec.Result
		streamed bool
		want     int
	}{
		{spec.Result{}, false, 0},
		{spec.Result{Stdout: "hi"}, false, 0},
		{spec.Result{Stdout: strings.Repeat("x", outputBytesPerMS-1)}, false, 0},
		{spec.Result{Stdout: strings.Repeat("x", outputBytesPerMS), Stderr: "y"}, false, 1},
		{spec.Result{Stdout: strings.Repeat("x", outputBytesPerMS), Stderr: strings.Repeat("y", outputBytesPerMS)}, false, 2},
		{spec.Result{Stdout: strings.Repeat("x", outputBytesPerMS)}, true, 2},
		{spec.Result{Value: strings.Repeat("v", outputBytesPerMS), Exception: &spec.Exception{Traceback: strings.Repeat("t", outputBytesPerMS)}}, false, 2},
		{spec.Result{Outputs: []spec.Output{{Data: strings.Repeat("A", 3*outputBytesPerMS)}}}, false, 3},
	}
	for _, tt := range tests {
		if got := outputCost(tt.r, tt.streamed); got != tt.want {
			t.Errorf("outputCost(%d+%d bytes, %d outputs) = %d, want %d", len(tt.r.Stdout), len(tt.r.Stderr), len(tt.r.Outputs), got, tt.want)
		}
	}
	m, info, s, clock := pacedSession(t)
	before := s.pace.lim.TokensAt(clock.t)
	big := strings.Repeat("x", 20*outputBytesPerMS) // the fake box echoes its argv
	if _, err := m.Exec(context.Background(), "alice", info.ID, ExecRequest{Command: []string{big}}, Stream{}); err != nil {
		t.Fatal(err)
	}
	if got, want := before-s.pace.lim.TokensAt(clock.t), float64(commandExecCost+20); got != want {
		t.Errorf("an exec printing 20 x %d bytes took %g tokens, want %g (the command and its output)", outputBytesPerMS, got, want)
	}
	p := newExecPacer(1, DefaultExecPace)
	var c fakeClock
	c.install(p)
	p.charge(3 * p.burst())
	if got, want := p.lim.TokensAt(c.t), float64(-2*p.burst()); got != want {
		t.Errorf("charging 3 bursts left %g tokens, want %g: a cost above the burst is charged whole", got, want)
	}
}
