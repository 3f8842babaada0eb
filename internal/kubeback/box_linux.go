package kubeback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Bounds of the API calls a box makes on its own.
const (
	// touchWait bounds recording a session's activity before an exec.
	touchWait = 5 * time.Second
	// causeWait bounds learning why a Pod's stream ended, from the Pod
	// watch and then the API server; under the 5 s the Manager waits
	// for Exited.
	causeWait = 4 * time.Second
	// deathWait is the part of causeWait spent waiting for the Pod
	// watch to tell a death (it lags the stream's end a little) before
	// asking the API server: the watch's word is the exact reason and
	// costs no call, where Find reads the claim and the Pod under the
	// replica's shared API rate.
	deathWait = 2 * time.Second
	// registerWait bounds registering a box with the Pod watch
	// (OnDeath reads the Pod once if the watch has not seen it), within
	// the attach's own deadline.
	registerWait = 4 * time.Second
)

// deathSource is what a box learns its Pod's death from: the Pod watch
// (OnDeath) and the claim and Pod as the API server has them (Find).
// The backend's Claimer is it; tests give a fake, so the death path is
// proven without a cluster.
type deathSource interface {
	OnDeath(ctx context.Context, s *podclaim.Session, fn func(error)) (stop func(), err error)
	Find(ctx context.Context, owner, id string) (*podclaim.Session, error)
}

// box is a claimed Pod's agent session: the agent's Box and its files
// (served by the agent), with the session's activity recorded on its
// claim, its release, and the cause of its death read from the cluster.
type box struct {
	sandbox.Box
	files  sandbox.RemoteFiler
	b      *Backend
	ps     *podclaim.Session
	deaths deathSource
	// deathWait is how long explain waits for the Pod watch's word
	// before it asks Find (the constant deathWait; tests set it).
	deathWait time.Duration
	// record writes the session's activity on its claim (the Claimer's
	// Touch of ps); log receives its failures.
	record func(context.Context) error
	// recordNetwork writes the session's network policy on its claim
	// (the Claimer's SetNetwork of ps).
	recordNetwork func(context.Context, spec.NetworkPolicy) error
	log           *slog.Logger

	// unheld is closed by Close or Release: the heartbeat stops.
	unheld     chan struct{}
	unheldOnce sync.Once

	// closed says Close ended the box: no death to explain.
	closed atomic.Bool
	// stopWatch cancels the Pod watch's callback (nil: unwatched).
	stopWatch func()
	// dead is closed once death holds the Pod watch's word on the
	// Pod's death (ErrDead, keyed on the Pod's UID).
	dead     chan struct{}
	deadOnce sync.Once
	death    error
	// settled is closed once cause is set (or known to stay nil), after
	// the box ended.
	settled chan struct{}
	cause   error
}

// newBox is the box of session ps on the agent's box ab, whose files
// its agent serves, explaining its death once it ends; ctx is the
// attach's, which bounds the registration with the Pod watch too.
func newBox(ctx context.Context, ab sandbox.Box, files sandbox.RemoteFiler, b *Backend, ps *podclaim.Session) *box {
	x := &box{
		Box: ab, files: files, b: b, ps: ps, deaths: b.claims, deathWait: deathWait, log: b.log,
		settled: make(chan struct{}), unheld: make(chan struct{}), dead: make(chan struct{}),
		record:        func(ctx context.Context) error { return b.claims.Touch(ctx, ps) },
		recordNetwork: func(ctx context.Context, n spec.NetworkPolicy) error { return b.claims.SetNetwork(ctx, ps, n) },
	}
	x.watchDeath(ctx)
	go x.explain()
	go x.heartbeat(b.cfg.ActivityInterval)
	return x
}

// heartbeat records the session's activity on its claim every half
// interval while this replica holds it (until Close or Release, or the
// box ends): the cluster's reaper must never delete the Pod of a session
// in use, and a persistent interpreter's cells or a long exec call no
// Exec or Spawn to touch it. Touch writes at most once per interval, so
// the claim's activity is never older than 1.5 intervals, within the
// reaper's grace of one interval past the idle timeout as long as that is
// at least half an interval. A held session's idle timeout is the
// Manager's reaper's, which releases the claim; the cluster's idle rule
// covers only the sessions no replica holds.
func (x *box) heartbeat(interval time.Duration) {
	t := time.NewTicker(max(interval/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-x.unheld:
			return
		case <-x.Box.Done():
			return
		case <-t.C:
			x.touch(context.Background())
		}
	}
}

// unhold stops the heartbeat and the Pod watch's callback.
func (x *box) unhold() {
	x.unheldOnce.Do(func() {
		close(x.unheld)
		if x.stopWatch != nil {
			x.stopWatch()
		}
	})
}

// watchDeath asks the backend's Pod watch to tell the Pod's death
// (podclaim.OnDeath, keyed on the Pod's UID), so that a Pod deleted,
// replaced or failed under the session ends its stream at once and
// names the cluster's reason. Unwatched (the watch not running yet),
// the death is learned from the stream's end and Find, as before. ctx
// (the attach's) bounds it, within registerWait: a create or an
// adoption never overruns its own deadline here.
func (x *box) watchDeath(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, registerWait)
	defer cancel()
	stop, err := x.deaths.OnDeath(ctx, x.ps, x.died)
	if err != nil {
		x.log.Warn("the session's Pod is not watched: its death is learned when its stream ends", "session", x.ps.ID, "pod", x.ps.Pod, "err", err)
		return
	}
	x.stopWatch = stop
}

// died is the Pod watch's word: a death (ErrDead) is recorded and ends
// the session's stream, so the Manager marks it dead now rather than
// when the connection times out; the watch's own end (ErrUnwatched)
// leaves the session to its stream.
func (x *box) died(err error) {
	if !errors.Is(err, podclaim.ErrDead) {
		x.log.Warn("the Pod watch ended: the session's death is learned when its stream ends", "session", x.ps.ID, "err", err)
		return
	}
	x.deadOnce.Do(func() {
		x.death = err
		close(x.dead)
	})
	if cerr := x.Box.Close(); cerr != nil {
		x.log.Warn("closing a dead Pod's stream", "session", x.ps.ID, "pod", x.ps.Pod, "err", cerr)
	}
}

// explain waits for the box to end and, unless Close ended it, learns
// why (a Pod deleted, replaced or failed under the session): from the
// Pod watch, which knows the Pod by its UID, or, if it tells nothing
// within deathWait, from the cluster (Find), so that Err names it;
// bounded by causeWait.
func (x *box) explain() {
	defer close(x.settled)
	<-x.Box.Done()
	if x.closed.Load() {
		return
	}
	prefix := fmt.Sprintf("session %q: %v: ", x.ps.ID, podclaim.ErrDead)
	t := time.NewTimer(x.deathWait)
	defer t.Stop()
	select {
	case <-x.dead:
		x.cause = podDeath{err: x.death, prefix: prefix}
		return
	case <-t.C:
	}
	x.cause = x.ask(prefix)
}

// ask is the cluster's word (Find) on a session whose stream ended with
// the Pod watch silent: its death's reason, or nil when the cluster
// says it lives or says nothing in time. A timeout or an API error names
// no cause of the death, so it is logged and Err stays the stream's own
// end rather than read as the session's reason.
func (x *box) ask(prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), causeWait-deathWait)
	defer cancel()
	_, err := x.deaths.Find(ctx, x.ps.Owner, x.ps.ID)
	switch {
	case err == nil || errors.Is(err, podclaim.ErrPending):
		return nil
	case errors.Is(err, podclaim.ErrNotFound):
		// A reaper released the claim first (its Pod was being deleted).
		return podDeath{err: fmt.Errorf("session %q: %w: its claim %s was released, and its Pod %s with it", x.ps.ID, podclaim.ErrDead, x.ps.Claim, x.ps.Pod), prefix: prefix}
	case errors.Is(err, podclaim.ErrDead):
		return podDeath{err: err, prefix: prefix}
	}
	x.log.Warn("no word from the cluster on why a session's stream ended: its reason is the stream's own end", "session", x.ps.ID, "pod", x.ps.Pod, "err", err)
	return nil
}

// Exited is closed once Err says all it will: the Manager waits for it
// (at most 5 s) before it reads why a box died.
func (x *box) Exited() <-chan struct{} { return x.settled }

// Close ends the session's connection (the Pod's init then ends its
// processes); the claim stays, for Release or another replica.
func (x *box) Close() error {
	x.closed.Store(true)
	x.unhold()
	return x.Box.Close()
}

// Exec records activity on the claim (at most once per activity
// interval) and runs c.
func (x *box) Exec(ctx context.Context, c sandbox.Command, live sandbox.Stream) (spec.Result, error) {
	x.touch(ctx)
	return x.Box.Exec(ctx, c, live)
}

// Spawn records activity as Exec does and starts c (an interpreter's or
// a command's process).
func (x *box) Spawn(ctx context.Context, c interp.Command) (interp.Process, error) {
	x.touch(ctx)
	return x.Box.Spawn(ctx, c)
}

// RemoteFiles is the file API of the Pod's agent over its stream (the
// Pod's files are not on this host), so the Manager serves a session's
// files through it. It records no activity: the heartbeat keeps a held
// session's claim, and the Manager's reaper counts the file call.
func (x *box) RemoteFiles(lim workspace.Limits) (workspace.Files, error) {
	return x.files.RemoteFiles(lim)
}

// SetNetwork records the new rules on the session's claim, then puts
// them in force on this replica's proxy: a replica that re-attaches the
// session later reads them from the claim, so a change the claim could
// not record is refused rather than left to be undone by a re-attach.
// Rules the proxy refuses (or a session whose stream ended meanwhile)
// put the record of the rules in force back, so that a later re-attach
// never applies rules the tenant was told failed; a failure to is
// logged (the session's rules in force are then the older ones only
// while this replica holds it). So does a record write that failed
// otherwise than for a claim gone: a timeout or a 5xx may come after
// the API server wrote it.
func (x *box) SetNetwork(allow, deny []string) error {
	n := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: allow, Deny: deny}
	if x.ps.Network.Mode != spec.NetProxy {
		// The agent's refusal, with no call: a session without the proxy has no way out to open.
		return x.Box.SetNetwork(allow, deny)
	}
	if err := n.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), touchWait)
	defer cancel()
	if err := x.recordNetwork(ctx, n); err != nil {
		if errors.Is(err, podclaim.ErrNotFound) {
			return fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
		}
		if !x.restoreNetwork() {
			return fmt.Errorf("%w (the new rules may be recorded on the session's claim though not in force: set the rules again)", err)
		}
		return err
	}
	if err := x.Box.SetNetwork(allow, deny); err != nil {
		// Logged by restoreNetwork; the proxy's refusal is the answer.
		_ = x.restoreNetwork()
		return err
	}
	x.ps.Network = n
	return nil
}

// restoreNetwork records the rules in force again after a SetNetwork
// whose rules were (or may have been) recorded but not applied, with a
// bound of its own (the first write may have spent the SetNetwork's),
// logging a failure; false says it failed.
func (x *box) restoreNetwork() bool {
	ctx, cancel := context.WithTimeout(context.Background(), touchWait)
	defer cancel()
	if err := x.recordNetwork(ctx, x.ps.Network); err != nil {
		x.log.Warn("putting back the session's network record after its new rules failed: a replica that re-attaches it may apply the failed rules", "session", x.ps.ID, "claim", x.ps.Claim, "err", err)
		return false
	}
	return true
}

// touch records activity, logging a failure: the exec is served all the
// same, and the idle reap's grace covers one missed interval.
func (x *box) touch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, touchWait)
	defer cancel()
	if err := x.record(ctx); err != nil {
		x.log.Warn("recording a session's activity on its claim", "session", x.ps.ID, "claim", x.ps.Claim, "err", err)
	}
}

// Release deletes the session's claim (the cluster then deletes its
// Pod): the session's end, at delete, TTL or idle timeout.
func (x *box) Release(ctx context.Context) error {
	x.unhold()
	err := x.b.claims.Release(ctx, x.ps)
	if errors.Is(err, podclaim.ErrNotFound) {
		return fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	return err
}

// Err is the agent session's end, or, once explain has it, the
// cluster's word on the session: a Pod deleted, replaced or failed under
// it is named (podclaim.ErrDead's reason) as its cause. It never waits.
func (x *box) Err() error {
	select {
	case <-x.settled:
		if x.cause != nil {
			return x.cause
		}
	default:
	}
	return x.Box.Err()
}

// podDeath is why a session's stream ended as the cluster tells it;
// prefix is what Find's error says before the reason, which the
// session's own reason needs not repeat.
type podDeath struct {
	err    error
	prefix string
}

func (d podDeath) Error() string { return d.err.Error() }
func (d podDeath) Unwrap() error { return d.err }

// Cause is the death as one clause for the session's reason: Find's
// reason (e.g. "its Pod default-x7k2p was deleted").
func (d podDeath) Cause() string { return strings.TrimPrefix(d.err.Error(), d.prefix) }
