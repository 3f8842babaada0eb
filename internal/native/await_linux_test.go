package native

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/spawn"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestAwait: a one-shot run waits for its init's status on a
// non-blocking control socket in the poller. A status arriving a byte
// at a time is read whole (the Go init's line, warden-exec's 20 bytes);
// an init that ends without one reads as EOF, the sandbox left to its
// end; a deadline while it waits kills it.
func TestAwait(t *testing.T) {
	ran := plan.Status{Kind: plan.StatusRan, ExitCode: 3}.Encode()
	tests := []struct {
		name         string
		fast         bool
		send         []byte
		hang         bool // the init sends, then waits to be killed
		wantStatus   *nsinit.Status
		wantEOF      bool
		wantKill     bool
		wantTimedOut bool
	}{
		{name: "Go init's status", send: []byte(`{"exit_code":3,"signal":0}` + "\n"), wantStatus: &nsinit.Status{ExitCode: 3}},
		{name: "warden-exec's status", fast: true, send: ran[:], wantStatus: &nsinit.Status{ExitCode: 3}},
		{name: "closed without a status", fast: true, wantEOF: true},
		{name: "closed within warden-exec's status", fast: true, send: ran[:7], wantKill: true},
		{name: "deadline while waiting", fast: true, send: ran[:7], hang: true, wantKill: true, wantTimedOut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &box{spec: &spec.Spec{}, ids: &idMapping{}}
			if err := b.makePipes(); err != nil {
				t.Fatal(err)
			}
			defer b.cleanup()
			cfg := &nsinit.Config{Command: []string{"true"}}
			if tt.fast {
				b.fast = &fastRun{sent: &plan.Plan{}}
			}
			proc, killed := fakeInit(t, b.child.control, tt.send, tt.hang)
			b.child.control = nil // fakeInit's now
			ctx := context.Background()
			if tt.hang {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, time.Now())
				defer cancel()
			}
			o := b.await(ctx, proc, cfg)
			if (o.status == nil) != (tt.wantStatus == nil) || (o.status != nil && *o.status != *tt.wantStatus) {
				t.Errorf("status %+v, want %+v", o.status, tt.wantStatus)
			}
			if got := errors.Is(o.err, io.EOF); got != tt.wantEOF {
				t.Errorf("error %v, want EOF %v", o.err, tt.wantEOF)
			}
			if got := len(killed) > 0; got != tt.wantKill {
				t.Errorf("killed %v, want %v", got, tt.wantKill)
			}
			if o.timedOut != tt.wantTimedOut || o.state == nil {
				t.Errorf("timed out %v, exit %v; want %v and an exit", o.timedOut, o.state, tt.wantTimedOut)
			}
		})
	}
}

// fakeInit plays an init on ctl: it writes send a byte at a time, then
// (unless hang) closes ctl and ends; a SIGKILL ends it at any time. The
// channel gets the SIGKILL.
func fakeInit(t *testing.T, ctl *os.File, send []byte, hang bool) (*initProc, chan syscall.Signal) {
	killed := make(chan syscall.Signal, 1)
	p := &initProc{exited: make(chan *spawn.Exit, 1)}
	end := make(chan struct{})
	p.signal = func(s syscall.Signal) error {
		if s == syscall.SIGKILL && len(killed) == 0 {
			killed <- s
			close(end)
		}
		return nil
	}
	go func() {
		defer func() { p.exited <- &spawn.Exit{} }()
		defer ctl.Close()
		for i := range send {
			if _, err := ctl.Write(send[i : i+1]); err != nil {
				t.Errorf("the fake init's write: %v", err)
				return
			}
		}
		if hang {
			<-end
		}
	}()
	return p, killed
}

// TestControlSocketPolled: a one-shot run's end of the control socket is
// non-blocking, so that its reads wait in the poller; a session's stays
// blocking, for agent.Session's raw calls.
func TestControlSocketPolled(t *testing.T) {
	for _, session := range []bool{false, true} {
		b := &box{spec: &spec.Spec{}, ids: &idMapping{}, session: session}
		if err := b.makePipes(); err != nil {
			t.Fatal(err)
		}
		flags, err := unix.FcntlInt(b.ctlHost.Fd(), unix.F_GETFL, 0)
		b.cleanup()
		if err != nil {
			t.Fatal(err)
		}
		if got := flags&unix.O_NONBLOCK != 0; got == session {
			t.Errorf("session %v: control socket non-blocking %v, want %v", session, got, !session)
		}
	}
}

// TestRunWaitsInThePoller: while a one-shot sandbox runs, no thread of
// the host sleeps in a blocking wait (the status read, the init's
// waitid); a cancel then ends the run. It runs the Go init only:
// warden-exec is looked for, trusted, beside this process's executable,
// which for a test is Go's build directory, and found once per process;
// test/e2e's TestRunWaitsInThePoller, which builds both, is the guard
// of the fast executor's waits (PID 1 held and reaped by spawn.PID1).
func TestRunWaitsInThePoller(t *testing.T) {
	testhost.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := &firstWrite{c: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		l := spec.DefaultLimits
		l.Timeout = 60 * time.Second
		_, err := Run(ctx, spec.Spec{Command: []string{"sh", "-c", "echo ready; exec sleep 60"}, Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, IO{Stdout: ready})
		done <- err
	}()
	select {
	case <-ready.c:
	case err := <-done:
		t.Fatalf("the run ended before its program wrote: %v", err)
	}
	testhost.NoBlockedWaits(t, os.Getpid(), 30)
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("canceled run: error %v, want the cancel's", err)
	}
}

// firstWrite closes c at its first write.
type firstWrite struct {
	once sync.Once
	c    chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}
