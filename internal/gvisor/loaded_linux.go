package gvisor

import (
	"context"
	"os/exec"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
)

// loadWait bounds how long Warden waits for a restored box's memory to
// load in the background (awaitLoaded): a box's memory is at most its
// limit, which a disk reads in well under it; past it the wait is given
// up and logged, the box running on.
const loadWait = 10 * time.Minute

// Loaded is closed once the memory of sess's box, restored by Restore,
// has loaded, its load has failed (the box then ends) or loadWait has
// passed, and at once for a box that loaded its memory before Restore
// returned or that Warden does not know. A caller that limits how many
// images are read at once (the server's copy slots) holds its slot until
// then: with --background the sandbox reads the image after Restore
// returned.
func (r *Runtime) Loaded(sess *agent.Session) <-chan struct{} {
	if b := r.boxOf(sess); b != nil && b.loaded != nil {
		return b.loaded
	}
	return closedChan
}

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// awaitLoaded closes b.loaded once `runsc wait --restore` says the
// background load of b's memory has ended, or failed, once b has ended,
// or after loadWait: runsc's wait returns at the load's end
// (containerManager.WaitRestore, after the sandbox's asyncMFLoader), and
// fails when the sandbox is gone.
func (b *box) awaitLoaded() {
	defer close(b.loaded)
	ctx, cancel := context.WithTimeout(context.Background(), loadWait)
	defer cancel()
	go func() {
		select {
		case <-b.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.runsc, b.r.args("wait", "--restore", b.id)...)
	cmd.WaitDelay = killTimeout
	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		b.logger().Warn("the restored box's memory did not load in time; its copy slot is given back while it may still load", "wait", loadWait)
	case err != nil && ctx.Err() == nil:
		b.logger().Info("the restored box's memory failed to load (the box ends)", "err", err, "after", time.Since(start))
	case err != nil:
		b.logger().Debug("the restored box ended while its memory loaded", "after", time.Since(start))
	default:
		b.logger().Debug("the restored box's memory has loaded", "after", time.Since(start))
	}
}
