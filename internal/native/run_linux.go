package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Run executes s in a fresh sandbox and reports how it ended. The returned
// error is set only when Warden itself failed (then Result.Error says the
// same); the program failing is a normal Result.
func Run(ctx context.Context, s spec.Spec, stdio IO) (spec.Result, error) {
	if err := s.Validate(); err != nil {
		return spec.Result{Error: err.Error()}, err
	}
	r, err := run(ctx, &s, stdio)
	if err != nil {
		r.Error = err.Error()
	}
	return r, err
}

func run(ctx context.Context, s *spec.Spec, stdio IO) (spec.Result, error) {
	b := &box{spec: s, stdio: stdio}
	defer b.cleanup()
	if err := b.prepare(); err != nil {
		return spec.Result{}, err
	}
	if s.Limits.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Limits.Timeout)
		defer cancel()
	}
	return b.execute(ctx)
}

// box is one sandbox's host-side resources; cleanup releases whatever
// prepare got, in any state.
type box struct {
	spec  *spec.Spec
	stdio IO

	ids       *idMapping
	cg        cgroup.Cgroup
	workspace *os.File
	// detachedWorkspace says workspace is a detached mount to move into
	// place rather than a directory to bind.
	detachedWorkspace bool
	ctlHost           *os.File
	ctlInit           *os.File
	// childFiles are the init's ends of the pipes, closed once it started.
	childFiles []*os.File
	stdin      *os.File
	stdinW     *os.File
	stdout     *os.File
	stderr     *os.File
}

func (b *box) prepare() error {
	var err error
	if b.spec.Workspace != "" {
		if b.workspace, err = openWorkspace(b.spec.Workspace); err != nil {
			return err
		}
	}
	if b.ids, err = newIDMapping(); err != nil {
		return err
	}
	if err := b.mapWorkspace(); err != nil {
		return err
	}
	return b.makePipes()
}

// mapWorkspace swaps the workspace directory for an idmapped mount of it
// when running as root (see idmappedWorkspace). Rootless runs need none:
// the invoking user's own ids are the ones mapped to the sandbox user.
func (b *box) mapWorkspace() error {
	if b.workspace == nil || b.ids.rootless {
		return nil
	}
	m, err := idmappedWorkspace(b.workspace, b.ids.uid, b.ids.gid)
	if err != nil || m == nil {
		return err
	}
	b.workspace.Close()
	b.workspace, b.detachedWorkspace = m, true
	return nil
}

func openWorkspace(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("workspace %q does not exist: create it first, or leave out --workspace for a private one", dir)
	case errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("workspace %q is not a directory", dir)
	case err != nil:
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// newCgroup creates the sandbox's cgroup. Rootless without a writable
// cgroup, a run that asked for no memory or CPU limit goes on without one:
// its pids limit is RLIMIT_NPROC, which the user namespace makes
// per-sandbox, and its figures come from rusage.
func newCgroup(l spec.Limits, rootless bool) (cgroup.Cgroup, error) {
	if !rootless {
		_ = cgroup.RemoveStale(processAlive)
	}
	want := cgroup.Limits{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs}
	if l.Pids > 0 {
		want.Pids = l.Pids + initTasks
	}
	cg, err := cgroup.New(cgroup.NewName(), want)
	switch {
	case err == nil:
		return cg, nil
	case errors.Is(err, cgroup.ErrNoCgroup) || (rootless && l.MemoryBytes == 0 && l.CPUs == 0):
		return nil, nil
	case errors.Is(err, cgroup.ErrControllerUnavailable):
		return nil, hostError{fmt.Errorf("pass --memory 0 --cpus 0 to run without memory and CPU limits, or: %w", err)}
	}
	return nil, fmt.Errorf("creating cgroup: %w", err)
}

func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

func (b *box) makePipes() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("creating control socket: %w", err)
	}
	b.ctlHost, b.ctlInit = os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	var outW, errW *os.File
	if b.stdout, outW, err = os.Pipe(); err != nil {
		return err
	}
	b.childFiles = append(b.childFiles, outW)
	if b.stderr, errW, err = os.Pipe(); err != nil {
		return err
	}
	b.childFiles = append(b.childFiles, errW)
	if b.stdio.Stdin == nil {
		b.stdin, err = os.Open(os.DevNull)
	} else {
		b.stdin, b.stdinW, err = os.Pipe()
	}
	return err
}

func (b *box) config() nsinit.Config {
	l := b.spec.Limits
	nproc := uint64(l.Pids)
	if nproc > 0 && b.ids.rootless {
		nproc += initTasks
	}
	return nsinit.Config{
		Command:          b.spec.Command,
		Env:              buildEnv(b.spec.Env),
		Hostname:         Hostname,
		Workspace:        b.workspace != nil,
		WorkspaceIsMount: b.detachedWorkspace,
		DiskBytes:        l.DiskBytes,
		Inodes:           l.Inodes(),
		Rlimits: nsinit.Rlimits{
			CPUSeconds:    uint64(l.CPUTime / time.Second),
			FileSizeBytes: uint64(l.FileSizeBytes),
			OpenFiles:     uint64(l.OpenFiles),
			Processes:     nproc,
		},
	}
}

func (b *box) cleanup() {
	for _, f := range append(b.childFiles, b.ctlHost, b.ctlInit, b.workspace, b.stdin, b.stdinW, b.stdout, b.stderr) {
		if f != nil {
			f.Close()
		}
	}
	if b.cg != nil {
		_ = b.cg.Delete()
	}
	if b.ids != nil {
		b.ids.release()
	}
}

// outcome is what the run's goroutines learn about its end.
type outcome struct {
	status   *nsinit.Status
	state    *os.ProcessState
	timedOut bool
	canceled bool
	wall     time.Duration
}

// execute starts the init, then creates and joins the cgroup while the
// init boots and builds the root, which it may do outside the cgroup: it is
// Warden's own code. The program starts only after Release, once the init
// is inside every limit.
func (b *box) execute(ctx context.Context) (spec.Result, error) {
	cfg := b.config()
	begin := time.Now()
	proc, err := startInit(b)
	if err != nil {
		return spec.Result{}, err
	}
	for _, f := range append(b.childFiles, b.ctlInit, b.workspace, b.stdin) {
		if f != nil {
			f.Close()
		}
	}
	b.childFiles, b.ctlInit, b.workspace, b.stdin = nil, nil, nil, nil
	if err := b.handOver(proc.pid, cfg); err != nil {
		proc.kill()
		<-proc.exited
		return spec.Result{}, err
	}
	out, errOut, drained := b.drain()
	o := b.await(ctx, proc)
	o.wall = time.Since(begin)
	drained.Wait()
	return b.result(o, out, errOut)
}

// handOver sends the config, places the init in its cgroup, and releases it.
func (b *box) handOver(pid int, cfg nsinit.Config) error {
	enc := json.NewEncoder(b.ctlHost)
	if err := enc.Encode(cfg); err != nil {
		return fmt.Errorf("sending sandbox config: %w", err)
	}
	var err error
	if b.cg, err = newCgroup(b.spec.Limits, b.ids.rootless); err != nil {
		return err
	}
	if b.cg != nil {
		if err := b.cg.AddProc(pid); err != nil {
			return fmt.Errorf("placing sandbox in cgroup: %w", err)
		}
	}
	// A failed send means the init is gone (it may have failed to build
	// the root and said why); await reads its status either way.
	_ = enc.Encode(nsinit.Release{})
	return nil
}

func (b *box) drain() (*capture, *capture, *sync.WaitGroup) {
	limit := b.spec.Limits.OutputBytes
	out := &capture{limit: limit, live: b.stdio.Stdout}
	errOut := &capture{limit: limit, live: b.stdio.Stderr}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); out.drain(b.stdout) }()
	go func() { defer wg.Done(); errOut.drain(b.stderr) }()
	if b.stdinW != nil {
		w := b.stdinW
		b.stdinW = nil
		go func() {
			_, _ = io.Copy(w, b.stdio.Stdin)
			w.Close()
		}()
	}
	return out, errOut, &wg
}

// await waits for the init's status, killing the sandbox at the deadline.
// The status read ends at EOF if the init dies without reporting.
func (b *box) await(ctx context.Context, proc *initProc) outcome {
	statusc := make(chan *nsinit.Status, 1)
	go func() {
		var st nsinit.Status
		if err := json.NewDecoder(b.ctlHost).Decode(&st); err != nil {
			statusc <- nil
			return
		}
		statusc <- &st
	}()
	var o outcome
	select {
	case o.status = <-statusc:
	case <-ctx.Done():
		o.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		o.canceled = !o.timedOut
		proc.kill()
		if b.cg != nil {
			_ = b.cg.Kill()
		}
	}
	o.state = <-proc.exited
	return o
}

func signalName(n int) string {
	if n == 0 {
		return ""
	}
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}
