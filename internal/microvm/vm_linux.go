package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/vmguest"
)

// drainGrace bounds how long teardown waits, once QEMU has exited, for the
// console pipe's end: what QEMU wrote is there within it, and a pipe held
// open past it is one QEMU handed on.
const drainGrace = time.Second

// closeGrace bounds how long Close waits for the guest to end the VM after
// its port is closed before QEMU is killed. The VM holds nothing to save,
// so the wait only spares a clean end; on a loaded host under TCG the
// guest's end took over 15 s now and then (a CI run), which a longer wait
// would not make certain.
const closeGrace = 5 * time.Second

// VM is one running QEMU microVM whose guest has said hello.
type VM struct {
	cmd       *exec.Cmd
	conn      net.Conn
	closeConn sync.Once
	id        *hostid.Lease
	ownID     bool // id was leased for this VM (not Config.ID): released at its end
	cg        cgroup.Cgroup
	console   *consoleLog
	boot      Boot
	accel     AccelChoice

	mu     sync.Mutex
	exited bool // QEMU has exited (not yet necessarily reaped): its pid may not be signalled
	// forker is closed once QEMU has exited, which ends the thread that
	// forked it (launch.fork).
	forker  chan struct{}
	done    chan struct{}
	waitErr error
}

// Start starts a VM and waits (at most cfg.BootTimeout, not counting
// the time QEMU waited for a CPU) for its guest's hello. Cancelling ctx
// kills the VM at any time. On failure QEMU is killed and the error is
// one line ending with the last console lines.
func Start(ctx context.Context, cfg Config) (*VM, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("microvm: starting QEMU under its own host uid needs root: run warden as root")
	}
	l, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	vm, err := l.start()
	l.closeFiles()
	if err != nil {
		return nil, err
	}
	go vm.watch(ctx)
	if err := vm.handshake(cfg.BootTimeout, l.started); err != nil {
		vm.Kill()
		<-vm.done
		return nil, fmt.Errorf("%w; console: %s", err, vm.console.tail(5))
	}
	return vm, nil
}

// Stream is the host end of the agent port, past the hello: a connection
// for streammux.New once the guest serves the agent there; nothing in the
// guest speaks streammux yet (handshake version 1 echoes what it gets).
// Closing it tells the guest the host is gone. It is closed once QEMU has
// ended, so read what the guest sent before that.
func (v *VM) Stream() net.Conn { return v.conn }

// Boot says how long the VM took to say hello.
func (v *VM) Boot() Boot { return v.boot }

// Accel is the accelerator the VM runs under, and why.
func (v *VM) Accel() AccelChoice { return v.accel }

// Pid is QEMU's process id (and process group id).
func (v *VM) Pid() int { return v.cmd.Process.Pid }

// Done is closed once QEMU has exited and been reaped.
func (v *VM) Done() <-chan struct{} { return v.done }

// Wait waits for QEMU to exit and returns how it ended.
func (v *VM) Wait() error {
	<-v.done
	return v.waitErr
}

// Console returns the last lines of the guest console and of QEMU's own
// messages, escaped.
func (v *VM) Console() []string { return v.console.Lines() }

// Kill kills QEMU's process group, then QEMU through its pidfd (which
// os.Process holds), unless it has already exited: a pid is only
// signalled while it cannot have been reused.
func (v *VM) Kill() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.exited {
		return
	}
	if err := unix.Kill(-v.cmd.Process.Pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		warn("killing QEMU's process group", err)
	}
	if err := v.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		warn("killing QEMU", err)
	}
}

// Close ends the VM: it closes the agent port, which makes the guest end
// the VM, and kills QEMU if it has not ended after closeGrace. The VM holds
// nothing to save, so a kill is no failure: Close returns nil then, and
// otherwise how QEMU ended (an error if QEMU itself failed). The guest's
// own end is not certain under QEMU 7.2 (docs/backends.md: its main loop
// may not watch the port when it closes).
func (v *VM) Close() error {
	v.closePort()
	select {
	case <-v.done:
		return v.Wait()
	case <-time.After(closeGrace):
		v.Kill()
		<-v.done
		return nil
	}
}

// closePort closes the host end of the agent port once.
func (v *VM) closePort() {
	v.closeConn.Do(func() {
		if err := v.conn.Close(); err != nil {
			warn("closing the agent port", err)
		}
	})
}

// handshake reads the guest's hello within timeout of QEMU's start, not
// counting the time QEMU waited for a CPU (stretchDeadline).
func (v *VM) handshake(timeout time.Duration, started time.Time) error {
	stop, err := stretchDeadline(v.conn, v.Pid(), started, timeout)
	if err != nil {
		return err
	}
	h, err := vmguest.ReadHello(v.conn)
	starved := stop()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("microvm: QEMU ended before the guest's hello: %w", err)
	}
	if err != nil {
		return fmt.Errorf("microvm: no valid hello from the guest within %v (and %v QEMU waited for a CPU, at most %d times the timeout in all): %w",
			timeout, starved.Round(time.Millisecond), maxBootStretch, err)
	}
	v.boot = guestHello(h, time.Since(started))
	if err := v.conn.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("microvm: clearing the boot deadline: %w", err)
	}
	return nil
}

// watch kills the VM when ctx ends first.
func (v *VM) watch(ctx context.Context) {
	select {
	case <-ctx.Done():
		v.Kill()
	case <-v.done:
	}
}

// reap waits for QEMU's exit without reaping it (WNOWAIT), marks it
// exited under mu so Kill stops signalling its pid, then reaps it (any
// thread may: the one that forked QEMU only keeps it alive, see fork) and
// closes the host ends: the agent port, and the console pipe after at
// most drainGrace, so a hostile QEMU cannot hold teardown forever.
func (v *VM) reap() {
	defer close(v.done)
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, v.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				warn("waiting for QEMU", err)
			}
			break
		}
	}
	v.mu.Lock()
	v.exited = true
	v.mu.Unlock()
	close(v.forker)
	v.waitErr = v.cmd.Wait()
	v.console.finish(drainGrace)
	v.closePort()
	deleteCgroup(v.cg)
	if v.ownID {
		v.id.Release() // after the reap: no process runs as it any more
	}
}

// pauseWait bounds a pause whose context has no deadline.
const pauseWait = 5 * time.Second

// Pause stops the whole VM where it stands, keeping its memory: every
// thread of QEMU, through its cgroup's freezer, so the guest neither runs
// nor sees a request until Resume. Its wait is bounded by ctx's deadline,
// or pauseWait; a VM that does not stop in time is thawed again and the
// error wraps cgroup.ErrFreezeTimeout, and a host without a freezer gives
// an error wrapping errors.ErrUnsupported.
func (v *VM) Pause(ctx context.Context) error {
	wait := pauseWait
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if err := v.cg.Freeze(wait); err != nil {
		return fmt.Errorf("microvm: pausing the VM: %w", err)
	}
	return nil
}

// Resume lets a paused VM run again; the guest's clock then jumps by the
// time it was paused, as a suspended machine's does.
func (v *VM) Resume(context.Context) error {
	if err := v.cg.Thaw(); err != nil {
		return fmt.Errorf("microvm: resuming the VM: %w", err)
	}
	return nil
}
