package kubeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// idleBox is an agent box nobody execs in (a persistent interpreter's
// cells reach neither Exec nor Spawn): Done closes at Close.
type idleBox struct {
	sandbox.Box
	once sync.Once
	done chan struct{}
}

func (b *idleBox) Done() <-chan struct{} { return b.done }
func (b *idleBox) Close() error          { b.once.Do(func() { close(b.done) }); return nil }

// errStreamEnded is an idleBox's Err once it ended: the stream's own
// end, as the agent tells it.
var errStreamEnded = errors.New("the agent's connection ended")

func (b *idleBox) Err() error {
	select {
	case <-b.done:
		return errStreamEnded
	default:
		return nil
	}
}

// TestHeartbeatWhileHeld: a held session whose box sees no Exec or Spawn
// for several activity intervals (an interpreter busy past the idle
// timeout) still records its activity on its claim, every half interval,
// so the cluster's reaper never finds it idle; Close stops it (Release
// unholds the same way before it deletes the claim).
func TestHeartbeatWhileHeld(t *testing.T) {
	ab := &idleBox{done: make(chan struct{})}
	records := make(chan struct{}, 64)
	x := &box{
		Box: ab, ps: &podclaim.Session{ID: "ses_x"}, log: slog.Default(),
		settled: make(chan struct{}), unheld: make(chan struct{}),
		record: func(context.Context) error { records <- struct{}{}; return nil },
	}
	x.closed.Store(true) // no death to explain: explain needs no cluster
	go x.explain()
	go x.heartbeat(20 * time.Millisecond)
	bound := time.After(time.Minute) // a bound on the wait, not a timing assertion
	for n := 0; n < 4; n++ {
		select {
		case <-records:
		case <-bound:
			t.Fatalf("got %d activity records in a minute with interval 20ms, want 4", n)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-x.unheld:
	default:
		t.Errorf("after Close: the heartbeat is still held, want it stopped")
	}
}

// fakeDeaths is a Pod watch and a cluster in one, for the death path
// without a cluster: OnDeath records the callback, which fire calls as
// the Pod watch would (never once stop returned); Find answers find.
type fakeDeaths struct {
	mu       sync.Mutex
	fn       func(error)
	stopped  bool
	deadline time.Time // OnDeath's ctx deadline
	find     error
	finds    int
}

func (f *fakeDeaths) OnDeath(ctx context.Context, _ *podclaim.Session, fn func(error)) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
	f.deadline, _ = ctx.Deadline()
	return func() { f.mu.Lock(); f.stopped = true; f.mu.Unlock() }, nil
}

func (f *fakeDeaths) Find(context.Context, string, string) (*podclaim.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finds++
	return nil, f.find
}

// fire tells the box err, as the Pod watch would: not after stop.
func (f *fakeDeaths) fire(err error) {
	f.mu.Lock()
	fn, stopped := f.fn, f.stopped
	f.mu.Unlock()
	if !stopped {
		fn(err)
	}
}

// watchedBox is a box on the idle agent box ab, registered with f as
// newBox registers it under ctx and explaining its end; wait is how
// long it waits for the watch before it asks Find.
func watchedBox(ctx context.Context, ab *idleBox, f *fakeDeaths, wait time.Duration) *box {
	x := &box{
		Box: ab, ps: &podclaim.Session{ID: "ses_x", Pod: "p", Claim: "c"}, deaths: f, deathWait: wait, log: slog.Default(),
		settled: make(chan struct{}), unheld: make(chan struct{}), dead: make(chan struct{}),
		record: func(context.Context) error { return nil },
	}
	x.watchDeath(ctx)
	go x.explain()
	return x
}

// settledWithin waits (bounded, not timed) for x's Exited.
func settledWithin(t *testing.T, x *box) {
	t.Helper()
	select {
	case <-x.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("the box's end was not explained within a minute")
	}
}

// TestDeathFromWatch: the Pod watch's word on a death ends the session's
// stream at once (the fallback's wait is an hour: the test would hit its
// bound) and is the session's reason, with no Find; the watch's own end
// (ErrUnwatched) neither ends the stream nor names a cause.
func TestDeathFromWatch(t *testing.T) {
	f := &fakeDeaths{}
	x := watchedBox(context.Background(), &idleBox{done: make(chan struct{})}, f, time.Hour)
	f.fire(fmt.Errorf("session %q: %w", "ses_x", podclaim.ErrUnwatched))
	select {
	case <-x.Box.Done():
		t.Fatalf("ErrUnwatched ended the stream, want it left to run")
	default:
	}
	f.fire(fmt.Errorf("session %q: %w: its Pod p is being deleted", "ses_x", podclaim.ErrDead))
	settledWithin(t, x)
	var d podDeath
	if err := x.Err(); !errors.As(err, &d) || d.Cause() != "its Pod p is being deleted" {
		t.Errorf("Err: got %v, want the watch's reason %q", err, "its Pod p is being deleted")
	}
	if f.finds != 0 {
		t.Errorf("Find was asked %d times, want 0: the watch told the death", f.finds)
	}
}

// TestDeathFallback: a stream that ends with the watch silent is
// explained by Find: its ErrDead or ErrNotFound is the reason; a
// timeout or an API error names no cause (Err stays the stream's own);
// a live session has none.
func TestDeathFallback(t *testing.T) {
	dead := fmt.Errorf("session %q: %w: its Pod p was deleted", "ses_x", podclaim.ErrDead)
	missing := fmt.Errorf("session %q: %w", "ses_x", podclaim.ErrNotFound)
	tests := []struct {
		name  string
		find  error
		cause string // "": no cause, Err is the stream's
	}{
		{"dead", dead, "its Pod p was deleted"},
		{"released", missing, "its claim c was released, and its Pod p with it"},
		{"timeout", fmt.Errorf("reading session %q's claim c: %w", "ses_x", context.DeadlineExceeded), ""},
		{"API error", errors.New("the server is currently unable to handle the request"), ""},
		{"alive", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDeaths{find: tt.find}
			ab := &idleBox{done: make(chan struct{})}
			x := watchedBox(context.Background(), ab, f, time.Millisecond)
			if err := ab.Close(); err != nil { // the stream ends, the watch says nothing
				t.Fatal(err)
			}
			settledWithin(t, x)
			if f.finds != 1 {
				t.Errorf("Find was asked %d times, want 1", f.finds)
			}
			var d podDeath
			got := ""
			if errors.As(x.Err(), &d) {
				got = d.Cause()
			}
			if got != tt.cause {
				t.Errorf("the death's cause: got %q, want %q (Err %v)", got, tt.cause, x.Err())
			}
			if tt.cause == "" && !errors.Is(x.Err(), errStreamEnded) {
				t.Errorf("Err: got %v, want the stream's own end %v", x.Err(), errStreamEnded)
			}
		})
	}
}

// TestDeathAfterStop: once the box is closed or released, its watch is
// stopped, so a later death (the replica's own release deleting the Pod)
// never reaches it; and the registration is bounded by the attach's
// deadline, not one of its own past it.
func TestDeathAfterStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	f := &fakeDeaths{}
	x := watchedBox(ctx, &idleBox{done: make(chan struct{})}, f, time.Hour)
	if f.deadline.After(want) {
		t.Errorf("OnDeath's deadline: got %v, want at most the attach's %v", f.deadline, want)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	f.fire(fmt.Errorf("session %q: %w: its Pod p was deleted", "ses_x", podclaim.ErrDead))
	settledWithin(t, x)
	if err := x.Err(); !errors.Is(err, errStreamEnded) {
		t.Errorf("Err after Close and a later death: got %v, want the stream's own end %v", err, errStreamEnded)
	}
	select {
	case <-x.dead:
		t.Errorf("a death after Close reached the box, want its watch stopped")
	default:
	}
}

// refusingBox is an agent box whose proxy refuses every SetNetwork.
type refusingBox struct{ sandbox.Box }

// errRulesRefused is refusingBox's SetNetwork error.
var errRulesRefused = errors.New("the proxy refused the rules")

func (refusingBox) SetNetwork([]string, []string) error { return errRulesRefused }

// TestSetNetworkRestoresRecord: rules recorded on the claim that the
// proxy then refuses are not left there for a re-attach to apply: the
// record of the rules in force is written back, and the error is the
// proxy's.
func TestSetNetworkRestoresRecord(t *testing.T) {
	old := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"old.example.com"}}
	var recorded []spec.NetworkPolicy
	x := &box{
		Box: refusingBox{}, ps: &podclaim.Session{ID: "ses_x", Network: old}, log: slog.Default(),
		recordNetwork: func(_ context.Context, n spec.NetworkPolicy) error { recorded = append(recorded, n); return nil },
	}
	err := x.SetNetwork([]string{"new.example.com"}, nil)
	if !errors.Is(err, errRulesRefused) {
		t.Errorf("SetNetwork = %v, want the proxy's refusal", err)
	}
	if len(recorded) != 2 || !slices.Equal(recorded[0].Allow, []string{"new.example.com"}) || !slices.Equal(recorded[1].Allow, old.Allow) || recorded[1].Mode != spec.NetProxy {
		t.Errorf("records written = %+v, want the new rules, then the rules in force %+v back", recorded, old)
	}
	if !slices.Equal(x.ps.Network.Allow, old.Allow) {
		t.Errorf("the session's rules after the refusal = %+v, want %+v", x.ps.Network, old)
	}
}

// TestSetNetworkRestoresAmbiguous: a record write that fails for a
// reason that may come after the API server wrote it (a timeout) puts
// the record of the rules in force back too, and one whose claim is gone
// does not; when the put-back fails as well, the error says the new
// rules may be recorded.
func TestSetNetworkRestoresAmbiguous(t *testing.T) {
	old := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"old.example.com"}}
	tests := []struct {
		name      string
		errs      []error
		last      []string // the last record's allow list
		mayRecord bool
	}{
		{"a timeout", []error{context.DeadlineExceeded, nil}, old.Allow, false},
		{"a timeout, the put-back failing", []error{context.DeadlineExceeded, context.DeadlineExceeded}, old.Allow, true},
		{"the claim gone", []error{podclaim.ErrNotFound}, []string{"new.example.com"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recorded []spec.NetworkPolicy
			x := &box{
				Box: refusingBox{}, ps: &podclaim.Session{ID: "ses_x", Network: old}, log: slog.Default(),
				recordNetwork: func(_ context.Context, n spec.NetworkPolicy) error {
					recorded = append(recorded, n)
					return tt.errs[len(recorded)-1]
				},
			}
			err := x.SetNetwork([]string{"new.example.com"}, nil)
			if err == nil || len(recorded) != len(tt.errs) || !slices.Equal(recorded[len(recorded)-1].Allow, tt.last) {
				t.Errorf("SetNetwork = %v after records %+v, want an error after %d writes, the last allowing %v", err, recorded, len(tt.errs), tt.last)
			}
			if got := err != nil && strings.Contains(err.Error(), "may be recorded"); got != tt.mayRecord {
				t.Errorf("SetNetwork = %v: says the rules may be recorded: %v, want %v", err, got, tt.mayRecord)
			}
		})
	}
}
