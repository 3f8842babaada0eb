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
	// causeWait bounds asking the API server why a Pod's stream ended;
	// under the 5 s the Manager waits for Exited.
	causeWait = 4 * time.Second
)

// box is a claimed Pod's agent session: the agent's Box (its files
// served by the agent, sandbox.RemoteFiler), with the
// session's activity recorded on its claim, its release, and the cause of
// its death read from the cluster.
type box struct {
	sandbox.Box
	b  *Backend
	ps *podclaim.Session
	// record writes the session's activity on its claim (the Claimer's
	// Touch of ps); log receives its failures.
	record func(context.Context) error
	log    *slog.Logger

	// unheld is closed by Close or Release: the heartbeat stops.
	unheld     chan struct{}
	unheldOnce sync.Once

	// closed says Close ended the box: no death to explain.
	closed atomic.Bool
	// settled is closed once cause is set (or known to stay nil), after
	// the box ended.
	settled chan struct{}
	cause   error
}

// newBox is the box of session ps on the agent's box ab, explaining
// its death once it ends.
func newBox(ab sandbox.Box, b *Backend, ps *podclaim.Session) *box {
	x := &box{
		Box: ab, b: b, ps: ps, log: b.log, settled: make(chan struct{}), unheld: make(chan struct{}),
		record: func(ctx context.Context) error { return b.claims.Touch(ctx, ps) },
	}
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

// unhold stops the heartbeat.
func (x *box) unhold() { x.unheldOnce.Do(func() { close(x.unheld) }) }

// explain waits for the box to end and, unless Close ended it, asks the
// cluster why (a Pod deleted, replaced or failed under the session), so
// that Err names it; bounded by causeWait.
func (x *box) explain() {
	defer close(x.settled)
	<-x.Box.Done()
	if x.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), causeWait)
	defer cancel()
	_, err := x.b.claims.Find(ctx, x.ps.Owner, x.ps.ID)
	if err == nil || errors.Is(err, podclaim.ErrPending) {
		return
	}
	prefix := fmt.Sprintf("session %q: %v: ", x.ps.ID, podclaim.ErrDead)
	if errors.Is(err, podclaim.ErrNotFound) {
		// A reaper released the claim first (its Pod was being deleted).
		err = fmt.Errorf("session %q: %w: its claim %s was released, and its Pod %s with it", x.ps.ID, podclaim.ErrDead, x.ps.Claim, x.ps.Pod)
	}
	x.cause = podDeath{err: err, prefix: prefix}
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
	rf, ok := x.Box.(sandbox.RemoteFiler)
	if !ok {
		return nil, fmt.Errorf("session %s: its agent's box serves no files: %w", x.ps.ID, errors.ErrUnsupported)
	}
	return rf.RemoteFiles(lim)
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
