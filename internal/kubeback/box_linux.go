package kubeback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Bounds of the API calls a box makes on its own.
const (
	// touchWait bounds recording a session's activity before an exec.
	touchWait = 5 * time.Second
	// releaseWait bounds releasing a claim.
	releaseWait = 30 * time.Second
	// causeWait bounds asking the API server why a Pod's stream ended.
	causeWait = 10 * time.Second
)

// box is a claimed Pod's agent session: the agent's Box, with the
// session's activity recorded on its claim, its release, and the cause of
// its death read from the cluster.
type box struct {
	sandbox.Box
	b  *Backend
	ps *podclaim.Session

	causeOnce sync.Once
	cause     error
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

// touch records activity, logging a failure: the exec is served all the
// same, and the idle reap's grace covers one missed interval.
func (x *box) touch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, touchWait)
	defer cancel()
	if err := x.b.claims.Touch(ctx, x.ps); err != nil {
		x.b.log.Warn("recording a session's activity on its claim", "session", x.ps.ID, "claim", x.ps.Claim, "err", err)
	}
}

// Release deletes the session's claim (the cluster then deletes its
// Pod): the session's end, at delete, TTL or idle timeout.
func (x *box) Release(ctx context.Context) error {
	err := x.b.claims.Release(ctx, x.ps)
	if errors.Is(err, podclaim.ErrNotFound) {
		return fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	return err
}

// Err is the agent session's end, with the cluster's word on the
// session once the stream ended: a Pod deleted, replaced or failed under
// the session is named (podclaim.ErrDead's reason) as its cause.
func (x *box) Err() error {
	err := x.Box.Err()
	if err == nil {
		return nil
	}
	x.causeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), causeWait)
		defer cancel()
		if _, ferr := x.b.claims.Find(ctx, x.ps.Owner, x.ps.ID); ferr != nil && !errors.Is(ferr, podclaim.ErrPending) {
			x.cause = podDeath{ferr}
		}
	})
	if x.cause != nil {
		return x.cause
	}
	return err
}

// podDeath is why a session's stream ended as the cluster tells it.
type podDeath struct{ err error }

func (d podDeath) Error() string { return d.err.Error() }
func (d podDeath) Unwrap() error { return d.err }

// Cause is the death as one clause for the session's reason.
func (d podDeath) Cause() string { return d.err.Error() }
