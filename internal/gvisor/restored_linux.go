package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// awaitRestored returns once runsc records the restored box b running,
// which the runsc restoring it does only after the sandbox took the
// image's files: the box's agent answers before, so a Restore that
// returned at its attach let the caller remove the image before runsc
// had opened it (the box then ended, "opening state file ... no such
// file or directory"), and a runsc pause failed "loading container:
// file does not exist" (both seen with runsc 2026-09-05). From here the
// image may go (restoreArgs). A box that ends first is an error naming
// how runsc ended; ctx bounds the wait. runsc state fails for a while
// during a restore (seen with two restores at once at load 15), so a
// failure is asked again, but each time later (up to maxStatePoll): one
// that keeps failing (a --root it cannot read) costs some hundred runs
// of runsc over ctx's 2 minutes, not thousands.
func (b *box) awaitRestored(ctx context.Context) error {
	wait := time.NewTimer(statePoll)
	defer wait.Stop()
	for delay := statePoll; ; {
		status, err := b.status(ctx)
		switch {
		case err == nil && status == "running":
			return nil
		case err == nil:
			delay = statePoll
		default:
			delay = min(2*delay, maxStatePoll)
		}
		wait.Reset(delay)
		select {
		case <-b.exited:
			return fmt.Errorf("restoring the box: it ended (%s)", b.ended())
		case <-ctx.Done():
			return b.notRecorded(status, errors.Join(ctx.Err(), err))
		case <-wait.C:
		}
	}
}

// notRecorded is the error of a restore whose box runsc did not record
// running in time (why: ctx's end and state's last error), with the
// status runsc last gave and the last line of runsc's log.
func (b *box) notRecorded(status string, why error) error {
	err := fmt.Errorf("restoring the box: runsc did not record it running in time, its last status %q (%w): retry when the host is less busy", status, why)
	if b.log == nil {
		return err
	}
	if line := lastLine(tail(b.log)); line != "" {
		return fmt.Errorf("%w; runsc: %s", err, line)
	}
	return err
}

// statePoll is how often awaitRestored asks runsc while it answers, and
// maxStatePoll how seldom at most while it fails.
const (
	statePoll    = 25 * time.Millisecond
	maxStatePoll = time.Second
)

// status is the box's container's status as runsc's state says it.
func (b *box) status(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, b.runsc, b.r.args("state", b.id)...).Output()
	if err != nil {
		return "", fmt.Errorf("runsc state: %w", err)
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", fmt.Errorf("runsc state: %w", err)
	}
	return st.Status, nil
}
