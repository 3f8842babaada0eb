package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/drain"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spawn"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/unixlisten"
)

// Run is Runtime.Run with the default logger.
func Run(ctx context.Context, s spec.Spec, stdio IO) (spec.Result, error) {
	return Runtime{}.Run(ctx, s, stdio)
}

// Run executes s in a fresh sandbox and reports how it ended. The returned
// error is set only when Warden itself failed (then Result.Error says the
// same); the program failing is a normal Result.
func (rt Runtime) Run(ctx context.Context, s spec.Spec, stdio IO) (spec.Result, error) {
	if err := s.Validate(); err != nil {
		return spec.Result{Error: err.Error()}, err
	}
	if err := rt.Executor.Validate(); err != nil {
		return spec.Result{Error: err.Error()}, err
	}
	if err := rt.checkListenerStdin(s.Network.Mode); err != nil {
		return spec.Result{Error: err.Error()}, err
	}
	r, err := rt.run(ctx, &s, stdio)
	if err != nil {
		r.Error = err.Error()
	}
	return r, err
}

// checkListenerStdin refuses a ListenerStdin but with --net none and a
// listening unix stream socket: the listener is to be the box's only way
// in, and no socket of the host's network may be its way out.
func (rt Runtime) checkListenerStdin(net spec.NetMode) error {
	if rt.ListenerStdin == nil {
		return nil
	}
	if net != spec.NetNone {
		return fmt.Errorf("a listener as stdin needs --net none, not %s: the listener is to be the sandbox's only way in", net)
	}
	if err := unixlisten.Check(rt.ListenerStdin); err != nil {
		return fmt.Errorf("the listener given as stdin: %w", err)
	}
	return nil
}

func (rt Runtime) run(ctx context.Context, s *spec.Spec, stdio IO) (spec.Result, error) {
	b := &box{spec: s, stdio: stdio, rt: rt}
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
	// rt gives the box its logger.
	rt Runtime
	// session keeps the init as an agent (see StartSession); its own
	// standard streams are then /dev/null.
	session bool

	ids *idMapping
	cg  cgroup.Cgroup
	// etc is the host's /etc template the init binds.
	etc rootfs.EtcTemplate
	// devices is where the init binds its device nodes from ("" for /dev).
	devices string
	// home is what the init writes into the fresh HOME (homeFiles).
	home []rootfs.HomeFile
	// egress is the sandbox's socket on the egress proxy (--net proxy).
	egress *egress.Attachment
	// detachedWorkspace says child.workspace is a detached mount to move
	// into place rather than a directory to bind.
	detachedWorkspace bool
	// lateCgroup (cgroup v1) says the cgroup is made while the init boots
	// and sent to it after the config; on v2 it must exist before the clone.
	lateCgroup bool
	// fast, when set, is the run warden-exec builds instead of the Go
	// init (chooseExecutor).
	fast *fastRun
	// child holds the init's ends, closed here once it has started.
	child initFiles
	// The host's ends.
	ctlHost, stdinW, stdout, stderr *os.File
}

// initFiles are the descriptors the init inherits.
type initFiles struct {
	stdin, stdout, stderr, control *os.File
	workspace                      *os.File
	// egress is an O_PATH descriptor of the proxy's socket for the bridge.
	egress *os.File
	// root is the template's root tree (see openRoot), nil on the host's.
	root *os.File
	// rootIsMount says root is a detached mount rather than a directory.
	rootIsMount bool
	// seed is the idmapped tree the init copies the template's home from
	// (see openSeed), nil when there is none.
	seed *os.File
	// cgroupDir (v2) is passed to clone3 to start the init inside.
	cgroupDir *os.File
}

// extra lists the descriptors from fd 3 on, in nsinit's order; a nil
// workspace leaves its number closed.
func (f *initFiles) extra() []*os.File {
	return []*os.File{f.control, f.workspace, f.egress, f.root, f.seed}
}

func (f *initFiles) close() {
	for _, file := range append(f.extra(), f.stdin, f.stdout, f.stderr, f.cgroupDir) {
		if file != nil {
			file.Close()
		}
	}
	*f = initFiles{}
}

func (b *box) prepare() error {
	var err error
	if host := b.hostDir(); host != "" {
		if b.child.workspace, err = openWorkspace(host); err != nil {
			return err
		}
	}
	if b.ids, err = newIDMapping(); err != nil {
		return err
	}
	if err := checkHardLimits(b.spec.Limits, b.nproc()); err != nil {
		return err
	}
	if err := b.openRoot(); err != nil {
		return err
	}
	if b.child.root == nil {
		if b.etc, err = rootfs.SharedEtc(etcBase(), agent.Hostname, os.Geteuid() == 0, b.log()); err != nil {
			return fmt.Errorf("preparing the sandbox's /etc: %w", err)
		}
		b.home = b.homeFiles()
	}
	if !b.ids.rootless {
		if b.devices, err = rootfs.SharedDevices(devicesDir); err != nil {
			return fmt.Errorf("preparing the sandbox's /dev: %w", err)
		}
	}
	if err := b.attachEgress(fmt.Sprintf("sandbox-%d", b.ids.uid)); err != nil {
		return err
	}
	if err := b.mapWorkspace(); err != nil {
		return err
	}
	if err := refuseEtcOverlap(b.hostDir(), etcBase()); err != nil {
		return err
	}
	b.lateCgroup = cgroup.Version() == "v1"
	if !b.lateCgroup {
		if b.cg, err = newCgroup(b.spec.Limits, b.ids.rootless, b.log()); err != nil {
			return err
		}
		if err := b.openCloneInto(); err != nil {
			return err
		}
	}
	return b.makePipes()
}

// hostDir is the host directory the sandbox takes in: the workspace, or
// the whole scratch.
func (b *box) hostDir() string {
	if b.spec.Scratch != "" {
		return b.spec.Scratch
	}
	return b.spec.Workspace
}

// mapWorkspace swaps the workspace directory for an idmapped mount of it
// when running as root (see idmappedWorkspace). Rootless runs need none:
// the invoking user's own ids are the ones mapped to the sandbox user.
func (b *box) mapWorkspace() error {
	if b.child.workspace == nil || b.ids.rootless {
		return nil
	}
	m, err := idmappedWorkspace(b.child.workspace, b.ids.uid, b.ids.gid)
	if err != nil || m == nil {
		return err
	}
	b.child.workspace.Close()
	b.child.workspace, b.detachedWorkspace = m, true
	return nil
}

// openWorkspace opens the workspace directory once, following no link on
// the way: a link planted by an earlier sandbox in a directory the caller
// later passes as a workspace must not lead the next one to /etc.
func openWorkspace(dir string) (*os.File, error) {
	fd, err := nsinit.OpenWorkspace(dir)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("workspace %q does not exist: create it first, or leave out --workspace for a private one", dir)
	case errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("workspace %q is not a directory", dir)
	case errors.Is(err, unix.ELOOP):
		real, _ := filepath.EvalSymlinks(dir)
		return nil, fmt.Errorf("workspace %q goes through a symbolic link, which Warden does not follow: give the real path (%s)", dir, real)
	case err != nil:
		return nil, fmt.Errorf("opening workspace %q: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// newCgroup creates the sandbox's cgroup. Rootless without a writable
// cgroup, a run that asked for no memory or CPU limit goes on without one:
// its pids limit is RLIMIT_NPROC, which the user namespace makes
// per-sandbox, and its figures come from rusage.
func newCgroup(l spec.Limits, rootless bool, log *slog.Logger) (cgroup.Cgroup, error) {
	if !rootless {
		sweepStale(log)
	}
	want := cgroup.Limits{MemoryBytes: l.MemoryBytes, CPUs: l.CPUs}
	if l.Pids > 0 {
		want.Pids = l.Pids + initTasks
	}
	cg, err := cgroup.New(boxname.New(), want)
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

// sweepEvery spaces the sweeps of dead Wardens' cgroups one process
// makes: each lists every sandbox cgroup of the host, which beside
// hundreds of sessions costs more than the rest of a cgroup's creation.
const sweepEvery = time.Second

var (
	sweepMu   sync.Mutex
	lastSweep time.Time
)

// sweepStale removes dead Wardens' cgroups, at most once per sweepEvery
// (warden run, which makes one sandbox, always sweeps).
func sweepStale(log *slog.Logger) {
	sweepMu.Lock()
	due := time.Since(lastSweep) >= sweepEvery
	if due {
		lastSweep = time.Now()
	}
	sweepMu.Unlock()
	if due {
		if err := cgroup.RemoveStale(boxname.Dead); err != nil {
			// The next sweep retries; doctor --leaks lists what stays.
			log.Warn("removing dead Wardens' sandbox cgroups", "err", err)
		}
	}
}

// openCloneInto opens the v2 cgroup for CLONE_INTO_CGROUP, so the init
// starts inside it rather than being migrated there.
func (b *box) openCloneInto() error {
	if b.cg == nil {
		return nil
	}
	dir := b.cg.Placement().CloneInto
	f, err := os.OpenFile(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening cgroup %q: %w", dir, err)
	}
	b.child.cgroupDir = f
	return nil
}

// sendCgroup (v1) creates the cgroup while the init boots, then sends the
// init the tasks files to join (sendCgroupFiles).
func (b *box) sendCgroup() error {
	if err := b.makeLateCgroup(); err != nil {
		return err
	}
	return b.sendCgroupFiles()
}

// makeLateCgroup (v1) creates the cgroup once the init has started.
func (b *box) makeLateCgroup() error {
	var err error
	b.cg, err = newCgroup(b.spec.Limits, b.ids.rootless, b.log())
	return err
}

// sendCgroupFiles (v1) sends the init the cgroup's tasks files to join,
// attached to one byte; with no cgroup the byte goes alone. Opened here,
// checked by the kernel with these credentials: the init may use them
// though it could not open them.
func (b *box) sendCgroupFiles() error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if b.cg != nil {
		for _, path := range b.cg.Placement().ThreadFiles {
			fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("opening cgroup file %q: %w", path, err)
			}
			fds = append(fds, fd)
		}
	}
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	if err := sendmsg(b.ctlHost, []byte{1}, rights); err != nil {
		return fmt.Errorf("sending the cgroup to the sandbox: %w", err)
	}
	return nil
}

// sendmsg sends b with rights on f, waiting in the poller while a
// non-blocking f's buffer is full.
func sendmsg(f *os.File, b, rights []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), b, rights, nil, 0)
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	return serr
}

func (b *box) makePipes() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("creating control socket: %w", err)
	}
	// A one-shot run's host end waits in the poller, not in a blocking
	// read (see spawn.Reap for why that matters); a session's
	// agent.Session reads and writes its raw descriptor.
	var nbErr error
	if !b.session {
		nbErr = unix.SetNonblock(fds[0], true)
	}
	b.ctlHost, b.child.control = os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control")
	if nbErr != nil {
		return fmt.Errorf("making the control socket non-blocking: %w", nbErr)
	}
	if b.session {
		return b.nullStdio()
	}
	if b.stdout, b.child.stdout, err = os.Pipe(); err != nil {
		return fmt.Errorf("creating stdout pipe: %w", err)
	}
	if b.stderr, b.child.stderr, err = os.Pipe(); err != nil {
		return fmt.Errorf("creating stderr pipe: %w", err)
	}
	switch {
	case b.rt.ListenerStdin != nil:
		b.child.stdin, err = dupFile(b.rt.ListenerStdin)
	case b.stdio.Stdin == nil:
		b.child.stdin, err = os.Open(os.DevNull)
	default:
		b.child.stdin, b.stdinW, err = os.Pipe()
	}
	if err != nil {
		return fmt.Errorf("creating stdin: %w", err)
	}
	return nil
}

// dupFile is a copy of f the box may close with its other inherited
// descriptors, leaving the caller's open.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("copying the listener given as stdin: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// nullStdio gives a session's agent /dev/null for its standard streams:
// each process it starts gets streams of its own.
func (b *box) nullStdio() error {
	for _, f := range []**os.File{&b.child.stdin, &b.child.stdout, &b.child.stderr} {
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", os.DevNull, err)
		}
		*f = null
	}
	return nil
}

// nproc is the Go init's RLIMIT_NPROC: the program's pids, plus the
// init's own tasks rootless, where the user namespace's count includes
// them (see nprocWith).
func (b *box) nproc() uint64 { return b.nprocWith(initTasks) }

// nprocWith is the RLIMIT_NPROC of an init that is itself tasks tasks:
// rootless, the program's pids plus those; else the program's pids.
func (b *box) nprocWith(tasks uint64) uint64 {
	nproc := uint64(b.spec.Limits.Pids)
	if nproc > 0 && b.ids.rootless {
		nproc += tasks
	}
	return nproc
}

func (b *box) config() nsinit.Config {
	l := b.spec.Limits
	nproc := b.nproc()
	return nsinit.Config{
		Command:          b.spec.Command,
		Env:              b.env(b.spec.Env),
		Hostname:         agent.Hostname,
		Etc:              b.etc,
		HomeFiles:        b.home,
		View:             agent.View(l),
		Devices:          b.devices,
		Root:             b.spec.Root.Dir,
		RootIsMount:      b.child.rootIsMount,
		SeedMount:        b.child.seed != nil,
		Template:         b.spec.Root.Template,
		Workspace:        b.child.workspace != nil,
		WorkspacePath:    b.hostDir(),
		WorkspaceIsMount: b.detachedWorkspace,
		HostScratch:      b.spec.Scratch != "",
		AwaitCgroup:      b.lateCgroup,
		Session:          b.session,
		Rootless:         b.ids.rootless,
		EgressPort:       b.egressPort(),
		EgressRate:       b.egressPace().Rate,
		EgressBurst:      b.egressPace().Burst,
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

// cleanup releases what prepare got. What it cannot remove is logged:
// nobody waits on it, and doctor --leaks finds it later.
func (b *box) cleanup() {
	b.child.close()
	if b.egress != nil {
		if err := b.egress.Close(); err != nil {
			b.log().Warn("closing the sandbox's egress proxy socket", "err", err)
		}
	}
	for _, f := range []*os.File{b.ctlHost, b.stdinW, b.stdout, b.stderr} {
		if f != nil {
			f.Close()
		}
	}
	if b.cg != nil {
		if err := b.cg.Delete(); err != nil {
			b.log().Warn("removing the sandbox's cgroup", "cgroup", b.cg.Path(), "err", err)
		}
	}
	if b.ids != nil {
		b.ids.release()
	}
}

// outcome is what the run's goroutines learn about its end.
type outcome struct {
	status   *nsinit.Status
	state    *spawn.Exit
	timedOut bool
	canceled bool
	wall     time.Duration
	// err is why there is no status: io.EOF when the init ended without
	// one, or how its answer broke the protocol.
	err error
}

// execute starts the init (or warden-exec), hands it the config (or the
// plan) and (v1) its cgroup, and waits for the program to end.
func (b *box) execute(ctx context.Context) (spec.Result, error) {
	cfg := b.config()
	if err := b.chooseExecutor(&cfg); err != nil {
		return spec.Result{}, err
	}
	begin := time.Now()
	proc, err := b.start(&cfg)
	if err != nil {
		return spec.Result{}, err
	}
	b.child.close()
	if err := b.handOver(cfg); err != nil {
		proc.kill() // a no-op when the init has ended, as initEnded says
		if !initEnded(err) {
			<-proc.exited
			return spec.Result{}, err
		}
	}
	ended := make(chan struct{})
	out, errOut, drained, err := b.drain(ended)
	if err != nil {
		proc.kill()
		<-proc.exited
		return spec.Result{}, err
	}
	o := b.await(ctx, proc, &cfg)
	o.wall = time.Since(begin)
	close(ended)
	drained.Wait()
	return b.result(o, out, errOut)
}

// initEnded says that a hand-over failed because the init had already
// ended (a refusal, a config it could not read, an init of another
// build): what it said, or how it ended, explains that better than the
// broken pipe, so the caller reads its answer as for any end. The caller
// still kills the init, which changes nothing for one that has ended (its
// exit status stands) and bounds the wait for one that has not.
func initEnded(err error) bool {
	return errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET)
}

// handOver sends the config (warden-exec: the plan) and, on v1, the
// cgroup the init must join before it does anything else.
func (b *box) handOver(cfg nsinit.Config) error {
	if b.fast != nil {
		return b.handOverPlan()
	}
	if err := nsinit.WriteConfig(b.ctlHost, cfg); err != nil {
		return fmt.Errorf("sending sandbox config: %w", err)
	}
	if b.lateCgroup {
		return b.sendCgroup()
	}
	return nil
}

// drain captures both outputs until their writers close; ended is closed
// when the program has ended. The pipes are closed when the drain ends.
func (b *box) drain(ended <-chan struct{}) (*agent.Capture, *agent.Capture, *sync.WaitGroup, error) {
	limit := b.spec.Limits.OutputBytes
	out := agent.NewCapture(limit, b.stdio.Stdout)
	errOut := agent.NewCapture(limit, b.stdio.Stderr)
	// drain.New closes the file it is given, even when it fails.
	outPipe, err := drain.New(b.stdout, ended, b.spec.Limits.CPUs)
	b.stdout = nil
	if err != nil {
		return nil, nil, nil, err
	}
	errPipe, err := drain.New(b.stderr, ended, b.spec.Limits.CPUs)
	b.stderr = nil
	if err != nil {
		outPipe.Close()
		return nil, nil, nil, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); defer outPipe.Close(); out.Drain(outPipe) }()
	go func() { defer wg.Done(); defer errPipe.Close(); errOut.Drain(errPipe) }()
	if b.stdinW != nil {
		w := b.stdinW
		b.stdinW = nil
		go func() {
			// The sandbox may stop reading at any time: its stdin's end is
			// not the host's to report.
			_, _ = io.Copy(w, b.stdio.Stdin)
			w.Close()
		}()
	}
	return out, errOut, &wg, nil
}

// await waits for the init's status, killing the sandbox at the deadline.
// The status read ends at EOF if the init dies without reporting; a status
// that breaks the protocol kills the sandbox and is the run's error.
// warden-exec's status is read as the Status the Go init would send for
// cfg.
func (b *box) await(ctx context.Context, proc *initProc, cfg *nsinit.Config) outcome {
	type answer struct {
		st  *nsinit.Status
		err error
	}
	statusc := make(chan answer, 1)
	go func() {
		read := nsinit.ReadStatus
		if b.fast != nil {
			read = func(io.Reader) (nsinit.Status, error) { return b.readPlanStatus(cfg) }
		}
		st, err := read(b.ctlHost)
		if err != nil {
			statusc <- answer{err: err}
			return
		}
		statusc <- answer{st: &st}
	}()
	var o outcome
	select {
	case a := <-statusc:
		o.status, o.err = a.st, a.err
		if o.err != nil && !errors.Is(o.err, io.EOF) {
			b.killAll(proc)
		}
	case <-ctx.Done():
		o.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		o.canceled = !o.timedOut
		b.killAll(proc)
	}
	o.state = <-proc.exited
	return o
}

// killAll kills the init and everything in the box's cgroup, which also
// finds what left the init's tree. A cgroup that cannot be killed is
// logged: the init's death still ends its PID namespace.
func (b *box) killAll(proc *initProc) {
	proc.kill()
	if b.cg == nil {
		return
	}
	if err := b.cg.Kill(); err != nil {
		b.log().Warn("killing the sandbox's cgroup", "cgroup", b.cg.Path(), "err", err)
	}
}

// log is the box's logger; the box is named after its sandbox user, which
// no other live box shares.
func (b *box) log() *slog.Logger {
	name := ""
	if b.ids != nil {
		name = fmt.Sprintf("sandbox-%d", b.ids.uid)
	}
	return b.rt.log(name)
}
