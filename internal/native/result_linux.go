package native

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spawn"
	"github.com/warden-sandbox/warden/internal/spec"
)

// startError explains why the kernel refused to create the namespaces;
// an executor that would not execute is said to be that, whatever its
// errno (warden-exec is vforked into no namespace: its EACCES is the
// exec's, not a user namespace's).
func startError(err error) error {
	if errors.Is(err, nsinit.ErrNoExecutor) {
		return fmt.Errorf("starting sandbox init: %w", err)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.EPERM || errno == syscall.EINVAL || errno == syscall.ENOSPC || errno == syscall.EACCES) {
		return hostError{fmt.Errorf("creating namespaces: %w; user namespaces may be disabled (kernel.unprivileged_userns_clone, user.max_user_namespaces)", err)}
	}
	return fmt.Errorf("starting sandbox init: %w", err)
}

// result turns the run's outcome into the contract's Result.
func (b *box) result(o outcome, out, errOut *agent.Capture) (spec.Result, error) {
	r := spec.Result{WallTimeMS: ms(o.wall), TimedOut: o.timedOut}
	b.stats(&r, o.state)
	var err error
	switch st := o.status; {
	case o.err != nil && !errors.Is(o.err, io.EOF):
		err = o.err
	case st != nil && st.StartFailed:
		errOut.Keep([]byte("warden: " + st.Error + "\n"))
		r.ExitCode = st.ExitCode
	case st != nil && st.Error != "":
		err = fmt.Errorf("building the sandbox: %s", st.Error)
	case st != nil && !o.timedOut:
		r.ExitCode, r.Signal = st.ExitCode, spec.SignalName(st.Signal)
	case o.timedOut || r.OOMKilled:
		r.ExitCode, r.Signal = 128+int(syscall.SIGKILL), "SIGKILL"
	case o.canceled:
		err = errors.New("run canceled before the program ended")
	default:
		err = silentEnd(o.state)
	}
	if b.egress != nil {
		r.Network = b.egress.Events()
	}
	r.Stdout, r.StdoutTruncated = out.Output()
	r.Stderr, r.StderrTruncated = errOut.Output()
	return r, err
}

// stats fills CPU, memory and OOM figures from the cgroup, and any figure
// it lacks (no cgroup, or no cpuacct or memory controller) from the init's
// rusage, which covers every process the init reaped.
func (b *box) stats(r *spec.Result, state *spawn.Exit) {
	if b.cg != nil {
		if st, err := b.cg.Stats(); err == nil {
			r.CPUTimeMS = ms(st.CPUTime)
			r.PeakMemoryBytes = st.PeakMemoryBytes
			r.OOMKilled = st.OOMKills > 0
		}
	}
	if state == nil {
		return
	}
	if r.CPUTimeMS == 0 {
		r.CPUTimeMS = ms(state.CPU())
	}
	if r.PeakMemoryBytes == 0 {
		r.PeakMemoryBytes = state.Rusage.Maxrss * 1024
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// silentEnd is the error for an init that ended without reporting,
// with what its exit code says where it says something.
func silentEnd(e *spawn.Exit) error {
	if e != nil && e.Status.Exited() {
		if hint := nsinit.SilentExit(e.Status.ExitStatus()); hint != "" {
			return fmt.Errorf("sandbox init ended without reporting (%v): %s", e, hint)
		}
	}
	return fmt.Errorf("sandbox init ended without reporting: %v", e)
}
