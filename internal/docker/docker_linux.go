package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/scratch"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Runtime starts boxes as containers of one engine.
type Runtime struct {
	// Image is the boxes' image; empty means Warden's own root image.
	Image string
	// Logger receives the warnings of cleanups nobody waits on (a
	// container, mount or directory left behind), with the box's name
	// (nil: slog.Default()).
	Logger *slog.Logger

	once   sync.Once
	engine engineAPI
	err    error
	// tmpl and image are the host root's template and the image of a
	// box on the host's root (hostImage), made once the first such box
	// needs them, and never written again once image is set; hostMu
	// guards them and hostRun, the attempt under way.
	hostMu  sync.Mutex
	hostRun *hostAttempt
	tmpl    rootfs.Template
	image   string
	// templates are the images made from templates (templateImage).
	templates templateImages
}

// StateDir holds the root template and one directory per box (its
// scratch tmpfs and the control socket's directory).
const StateDir = "/run/warden/docker"

// Label marks every container Warden makes; its value is the identity of
// the Warden that made it (boxname.Owner: boot, pid namespace, pid, start
// time), so a dead Warden's leftovers can be told from the live containers
// of a Warden in another pid namespace that shares the engine.
const Label = "warden.sandbox"

// controlDir is where the box finds the host's control socket.
const controlDir = "/.warden/run"

// prepare connects to the engine (unless a test gave one) and removes
// dead Wardens' leftovers, once per process. It makes no image: boxes on
// templates never need Warden's root image (hostImage).
func (r *Runtime) prepare(ctx context.Context) error {
	r.once.Do(func() {
		if r.engine == nil {
			var e *Engine
			if e, r.err = NewEngine(); r.err != nil {
				return
			}
			r.engine = e
		}
		if r.err = r.engine.Ping(ctx); r.err != nil {
			r.err = fmt.Errorf("the docker backend needs a running Docker engine: %w", r.err)
			return
		}
		if r.err = os.MkdirAll(StateDir, 0o700); r.err != nil {
			return
		}
		if _, r.err = boxname.Self(); r.err != nil {
			r.err = fmt.Errorf("reading the identity containers are labelled with: %w", r.err)
			return
		}
		r.removeStale(ctx)
	})
	return r.err
}

// boxImage is the image of a box on root: its template's
// (templateImage), or the host root's (hostImage).
func (r *Runtime) boxImage(ctx context.Context, root spec.Root) (string, error) {
	if !root.IsHost() {
		return r.templateImage(ctx, root)
	}
	return r.hostImage(ctx)
}

// hostImportTimeout bounds one attempt at the host root's image: the
// attempt outlives the request that started it (others wait for it too).
const hostImportTimeout = 10 * time.Minute

// hostAttempt is one attempt at the host root's image; done is closed
// once err is set.
type hostAttempt struct {
	done chan struct{}
	err  error
}

// hostImage writes the host root's template and picks the image of a box
// on the host's root (pickImage) when the first such box starts: a
// Warden whose boxes all run on templates never imports Warden's root
// image. One attempt runs at a time, bounded by hostImportTimeout and not
// by any one caller's ctx (a caller that gives up leaves it to the
// others); a failed attempt is not kept, so the next box tries again.
func (r *Runtime) hostImage(ctx context.Context) (string, error) {
	r.hostMu.Lock()
	if r.image != "" {
		defer r.hostMu.Unlock()
		return r.image, nil
	}
	a := r.hostRun
	if a == nil {
		a = &hostAttempt{done: make(chan struct{})}
		r.hostRun = a
		go r.makeHostImage(context.WithoutCancel(ctx), a)
	}
	r.hostMu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if a.err != nil {
		return "", a.err
	}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	return r.image, nil
}

// makeHostImage runs the attempt a and records what it made.
func (r *Runtime) makeHostImage(ctx context.Context, a *hostAttempt) {
	ctx, cancel := context.WithTimeout(ctx, hostImportTimeout)
	defer cancel()
	tmpl, err := rootfs.SharedTemplate(StateDir)
	var image string
	if err != nil {
		err = fmt.Errorf("writing the root template: %w", err)
	} else {
		image, err = r.pickImage(ctx, tmpl)
	}
	r.hostMu.Lock()
	if err == nil {
		r.tmpl, r.image = tmpl, image
	}
	r.hostRun = nil
	a.err = err
	close(a.done)
	r.hostMu.Unlock()
}

// pickImage is the boxes' image: --image, once checked, or else Warden's
// own root image, made from the template if the engine lacks it.
func (r *Runtime) pickImage(ctx context.Context, tmpl rootfs.Template) (string, error) {
	if r.Image == "" {
		return rootImage(ctx, r.engine, tmpl)
	}
	return r.Image, r.checkImage(ctx, r.Image)
}

// checkImage refuses an image that declares volumes: Docker would put
// each on the host's disk, outside --disk, writable and executable.
func (r *Runtime) checkImage(ctx context.Context, image string) error {
	vols, err := r.engine.ImageVolumes(ctx, image)
	if err != nil {
		return fmt.Errorf("inspecting --image %s: %w", image, err)
	}
	if len(vols) > 0 {
		return fmt.Errorf("--image %s declares volumes %v, which would bypass --disk on the host's disk; use an image without VOLUME", image, vols)
	}
	return nil
}

// box is one container and what the host keeps for it.
type box struct {
	r      *Runtime
	name   string
	dir    string
	id     string
	ctl    *os.File
	att    *egress.Attachment
	exited chan struct{}
	// lease is the host uid and gid of the box's user: a container has
	// no user namespace, so each box gets ids no one else has.
	lease *hostid.Lease
	// stopWatch ends watch's wait once the container is removed.
	stopWatch context.CancelFunc
	// keepLogs makes cleanup keep the container's last words in logs,
	// for the error of a box that never became ready.
	keepLogs bool
	logs     string
	// view is the box's own /proc files and CPUs.
	view boxView
	// status is the container's exit status as the engine reported it,
	// set before exited is closed; nil when the engine did not say.
	status *int
	// image is the container's image: --image, Warden's root image, or
	// a template's (templateImage).
	image string
	// etc names Warden's generated /etc files in the scratch tmpfs's
	// etc directory, bound over a template's own (none on the host's
	// root, whose /etc is Warden's already).
	etc []string
}

// Start makes a container for a session of s and returns once its agent
// is ready; ctx bounds the start only.
func (r *Runtime) Start(ctx context.Context, s spec.Spec) (*agent.Session, error) {
	if err := s.ValidateSandbox(); err != nil {
		return nil, err
	}
	if s.Workspace != "" {
		return nil, fmt.Errorf("%w: the docker backend does not mount a host --workspace yet; copy files in through the session's file API instead", spec.ErrInvalid)
	}
	if s.Scratch != "" {
		return nil, fmt.Errorf("%w: the docker backend keeps its writable space in its own scratch; it takes no host scratch", spec.ErrInvalid)
	}
	if err := r.templateRootError(s); err != nil {
		return nil, err
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	image, err := r.boxImage(ctx, s.Root)
	if err != nil {
		return nil, err
	}
	b := &box{r: r, name: boxname.Box(), image: image, exited: make(chan struct{})}
	b.dir = filepath.Join(StateDir, "box-"+b.name)
	if err := b.start(ctx, s); err != nil {
		if b.ctl != nil {
			b.ctl.Close()
		}
		b.cleanup()
		return nil, err
	}
	f := agent.Frame{
		Spec: s, Control: b.ctl, UID: b.lease.ID(), GID: b.lease.ID(), Egress: b.att,
		Env:           func(extra []string) []string { return agent.ImageEnv(b.att != nil, s.Root.Env, extra) },
		Log:           b.logger(),
		OpenWorkspace: func() (*os.File, error) { return rootfs.OpenScratchWorkspace(filepath.Join(b.dir, "scratch")) },
		Kill:          b.kill, Exited: b.exited, Cleanup: b.cleanup,
		Ended: b.ended, ExitCode: b.exitCode,
		Pause:  func(ctx context.Context) error { return b.r.engine.Pause(ctx, b.id) },
		Resume: func(ctx context.Context) error { return b.r.engine.Unpause(ctx, b.id) },
	}
	b.keepLogs = true
	sess, err := agent.Attach(ctx, f)
	if err != nil && b.logs != "" {
		return nil, fmt.Errorf("%w: the container said: %s", err, b.logs)
	}
	b.keepLogs = false
	return sess, err
}

// start makes the scratch tmpfs and the control socket, creates and
// starts the container, and takes the init's connection.
func (b *box) start(ctx context.Context, s spec.Spec) error {
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		return err
	}
	var err error
	if b.lease, err = hostid.Take(); err != nil {
		return err
	}
	tmpfs := filepath.Join(b.dir, "scratch")
	if err := rootfs.MountScratch(tmpfs, s.Limits.DiskBytes, s.Limits.Inodes(), b.lease.ID(), b.lease.ID()); err != nil {
		return err
	}
	// The socket's directory and the hostname live in the scratch tmpfs,
	// outside the directories the box sees of it, so the box's mountinfo
	// names them by their paths in it, not by host paths.
	run := filepath.Join(tmpfs, "run")
	if err := mkdirMode(run, 0o755); err != nil {
		return err
	}
	if err := writeFileMode(filepath.Join(tmpfs, "hostname"), []byte(agent.Hostname+"\n"), 0o444); err != nil {
		return err
	}
	if !s.Root.IsHost() {
		if b.etc, err = rootfs.WriteGeneratedEtc(filepath.Join(tmpfs, "etc"), agent.Hostname); err != nil {
			return err
		}
	}
	if b.view, err = makeView(tmpfs, s.Limits); err != nil {
		return fmt.Errorf("showing the box its own /proc: %w", err)
	}
	sock := filepath.Join(run, "ctl.sock")
	var ln *net.UnixListener
	ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return err
	}
	defer ln.Close()
	// Only the init, as root, may connect; the socket goes once it has.
	if err := os.Chmod(sock, 0o600); err != nil {
		return err
	}
	// Last of the scratch's files, so Warden's own above (the socket
	// too) fit whatever the template holds.
	if err := scratch.SeedBox(tmpfs, s.Root); err != nil {
		return err
	}
	if b.att, err = agent.AttachEgressFor(b.name, s); err != nil {
		return err
	}
	path, err := nsinit.BinaryPath()
	if err != nil {
		return err
	}
	init, release, err := leaseInit(path)
	if err != nil {
		return err
	}
	if err := b.launch(ctx, b.config(s, init, tmpfs, run), release, ln); err != nil {
		return err
	}
	os.Remove(sock)
	boot := agent.BoxedConfig(s, false, true)
	boot.UID, boot.GID = b.lease.ID(), b.lease.ID()
	return agent.HandOverBoxed(b.ctl, boot, b.att)
}

// launch runs the container of cfg, releases the init's lease once it
// has started (or failed to), watches it, and takes its init's
// connection on ln as b.ctl. On an error, b.cleanup removes what it made.
func (b *box) launch(ctx context.Context, cfg ContainerConfig, release func() error, ln *net.UnixListener) error {
	if err := withReleased(b.run(ctx, cfg), release); err != nil {
		return err
	}
	var wctx context.Context
	wctx, b.stopWatch = context.WithCancel(context.Background())
	go b.watch(wctx)
	var err error
	b.ctl, err = b.accept(ctx, ln)
	return err
}

// run creates and starts the container; once it has started, its init's
// copy is bound and may go from initDir.
func (b *box) run(ctx context.Context, cfg ContainerConfig) error {
	var err error
	if b.id, err = b.r.engine.Create(ctx, b.name, cfg); err != nil {
		return fmt.Errorf("creating the container: %w", err)
	}
	if err := b.r.engine.Start(ctx, b.id); err != nil {
		close(b.exited)
		return fmt.Errorf("starting the container: %w", err)
	}
	return nil
}

// withReleased calls release, of the init's lease, and returns err with
// release's error joined to it: a failed start must not hide that the
// lock could not be released, nor the lock's error the start's.
func withReleased(err error, release func() error) error {
	if rerr := release(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("releasing %s: %w", initLock, rerr))
	}
	return err
}

// acceptTimeout bounds the wait for the init to connect.
const acceptTimeout = 30 * time.Second

// accept takes the init's connection and checks, by the peer's
// credentials, that it is the container's PID 1.
func (b *box) accept(ctx context.Context, ln *net.UnixListener) (*os.File, error) {
	_ = ln.SetDeadline(time.Now().Add(acceptTimeout)) // fails only on a closed listener, which Accept reports
	accepted := make(chan struct{})
	defer close(accepted)
	go func() {
		select {
		case <-ctx.Done():
		case <-b.exited:
		case <-accepted:
			return
		}
		ln.Close()
	}()
	c, err := ln.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("waiting for the container's init: %w", err)
	}
	defer c.Close()
	f, err := c.File()
	if err != nil {
		return nil, err
	}
	cred, err := unix.GetsockoptUcred(int(f.Fd()), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		f.Close()
		return nil, err
	}
	pid, err := b.r.engine.Pid(ctx, b.id)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("asking the engine for the container's pid to check the control socket's peer: %w", err)
	}
	if pid == 0 || int(cred.Pid) != pid {
		f.Close()
		return nil, fmt.Errorf("the control socket was reached by pid %d, not the container's init (%d)", cred.Pid, pid)
	}
	return f, nil
}

// config is the container: Warden's init as PID 1 with only the
// capabilities it keeps, read-only root, no network, the limits, its own
// cgroup namespace (so its cgroup paths do not name the container), and
// an /etc/hostname of Warden's (Docker's own names the container's id in
// its host path).
func (b *box) config(s spec.Spec, init, scratch, run string) ContainerConfig {
	l := s.Limits
	binds := []string{
		init + ":" + nsinit.BoxedPath + ":ro", run + ":" + controlDir + ":ro",
		filepath.Join(scratch, "hostname") + ":/etc/hostname:ro",
	}
	binds = append(binds, b.view.binds...)
	for name, dst := range rootfs.ScratchDirs {
		// The scratch tmpfs is nosuid,nodev on the host, which its binds keep.
		binds = append(binds, filepath.Join(scratch, name)+":"+dst+":rw")
	}
	binds = append(binds, b.rootBinds(s, scratch)...)
	hc := HostConfig{
		Binds: binds, NetworkMode: "none", IpcMode: "private", CgroupnsMode: "private",
		CapDrop: []string{"ALL"}, CapAdd: []string{"SETUID", "SETGID", "KILL", "SETPCAP"},
		SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true,
		MaskedPaths: maskedPaths(), ReadonlyPaths: readonlyPaths(),
		CpusetCpus: b.view.cpuset,
	}
	if l.MemoryBytes > 0 {
		hc.Memory, hc.MemorySwap = l.MemoryBytes, l.MemoryBytes
	}
	if l.CPUs > 0 {
		hc.NanoCPUs = nanoCPUs(l.CPUs, b.view.cpus)
	}
	if l.Pids > 0 {
		hc.PidsLimit = l.Pids + initTasks
	}
	return ContainerConfig{
		Image: b.image, User: "0:0", Hostname: agent.Hostname, WorkingDir: "/",
		Entrypoint: []string{nsinit.BoxedPath, nsinit.BoxedConnect, controlDir + "/ctl.sock"},
		Env:        []string{"GOMAXPROCS=1"},
		Labels:     map[string]string{Label: ownerLabel()},
		HostConfig: hc, NetworkDisabled: true,
	}
}

// ownerLabel is Label's value: this process's boxname.Owner, which
// prepare has read (and refused to go on without) before any box is made.
func ownerLabel() string {
	me, _ := boxname.Self()
	return me.String()
}

// rootBinds are what is bound over the image's files: on a template,
// the scratch's tmp at /var/tmp (rootfs.ImageVarTmp) and Warden's
// generated /etc files (but the hostname, bound on every image);
// on Warden's root image, the host's /usr and the template's bound /etc
// entries; on an --image, nothing.
func (b *box) rootBinds(s spec.Spec, scratch string) []string {
	var binds []string
	switch {
	case !s.Root.IsHost():
		if rootfs.ImageVarTmp(s.Root.Dir) {
			binds = append(binds, filepath.Join(scratch, "tmp")+":/var/tmp:rw")
		}
		for _, name := range b.etc {
			if name != "hostname" {
				binds = append(binds, filepath.Join(scratch, "etc", name)+":/etc/"+name+":ro")
			}
		}
	case b.r.Image == "":
		for _, p := range b.r.tmpl.Binds {
			binds = append(binds, p+":"+p+":ro")
		}
	}
	return binds
}

// maskedPaths hides what the native root hides in /proc, the native
// view's files runc will not bind (unbindableView), all of /sys (native
// mounts none) and /dev/mqueue (shared with nothing, but native has
// none), covering Docker's own default list.
func maskedPaths() []string {
	ps := append([]string{"/sys", "/dev/mqueue", "/proc/scsi"}, unbindableView()...)
	for _, p := range rootfs.MaskedProcPaths {
		ps = append(ps, "/proc/"+p)
	}
	return ps
}

// readonlyPaths are /proc's kernel-wide settings, as in the native root.
func readonlyPaths() []string {
	var ps []string
	for _, p := range rootfs.ReadonlyProcPaths {
		ps = append(ps, "/proc/"+p)
	}
	return ps
}

// initTasks is the head-room the pids cgroup gives the init's threads on
// top of --pids, which RLIMIT_NPROC enforces exactly: the box's uid is
// its own (hostid), so the kernel counts only its processes. The whole
// init is in the container's cgroup: its main thread, the sysinfo
// answerer's locked thread (and the one the Go runtime may start in its
// place) and the runtime's few others (a session's init had seven).
const initTasks = 10

// watch closes exited once the container has stopped, or once the
// engine has failed to say so for waitRetries tries in a row (an engine
// that went away): a box nobody can reach counts as ended, so closing a
// session never hangs on it.
func (b *box) watch(ctx context.Context) {
	defer close(b.exited)
	for i := 0; i < waitRetries && ctx.Err() == nil; i++ {
		status, err := b.r.engine.Wait(ctx, b.id)
		if err == nil {
			b.status = &status
		}
		if err == nil || IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ended says how the container ended, once exited is closed, in the
// words of os.ProcessState ("exit status 113", "signal: killed"), for
// the session's errors.
func (b *box) ended() string {
	if b.status == nil {
		return "the engine did not say how"
	}
	if sig, ok := signalled(*b.status); ok {
		return "signal: " + sig.String()
	}
	return "exit status " + strconv.Itoa(*b.status)
}

// exitCode is the container's init's exit code once exited is closed,
// -1 when a signal ended it or the engine did not say.
func (b *box) exitCode() int {
	if b.status == nil {
		return -1
	}
	if _, ok := signalled(*b.status); ok {
		return -1
	}
	return *b.status
}

// signalled reads the engine's exit status of a container: 128+n means
// signal n ended its PID 1.
func signalled(status int) (unix.Signal, bool) {
	if status > 128 && status <= 128+64 {
		return unix.Signal(status - 128), true
	}
	return 0, false
}

// waitRetries bounds watch's retries, 100 ms apart.
const waitRetries = 100

// stopGrace is how long the container gets to stop once its agent's
// control connection is shut, before the engine kills it.
const stopGrace = 3 * time.Second

// kill ends the box: the agent, PID 1, exits when its control connection
// shuts, and the container with it; the engine's kill is the fallback.
func (b *box) kill() {
	if b.id == "" {
		return
	}
	if b.ctl != nil {
		if err := agent.ShutdownControl(b.ctl); err != nil && !errors.Is(err, os.ErrClosed) {
			b.logger().Warn("shutting the box's control connection", "err", err)
		}
	}
	select {
	case <-b.exited:
		return
	case <-time.After(stopGrace):
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	if err := b.r.engine.Kill(ctx, b.id); err != nil {
		// cleanup's Remove kills it again, forcing.
		b.logger().Warn("killing the box's container", "err", err)
	}
}

// cleanup removes the container, the scratch tmpfs and the box's
// directory (boxname.RemoveDir, which leaves a directory that still holds
// a mount to the stale sweep); it is safe at any stage of start.
func (b *box) cleanup() {
	if b.id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if b.keepLogs {
			logs, _ := b.r.engine.Logs(ctx, b.id)
			b.logs = strings.TrimSpace(logs)
		}
		if err := b.r.engine.Remove(ctx, b.id); err != nil {
			b.logger().Warn("removing the box's container", "err", err)
		}
		cancel()
		select {
		case <-b.exited:
		case <-time.After(stopGrace):
		}
		if b.stopWatch != nil {
			b.stopWatch()
			<-b.exited
		}
	}
	if b.lease != nil {
		b.lease.Release()
	}
	if b.att != nil {
		if err := b.att.Close(); err != nil {
			b.logger().Warn("closing the box's egress proxy socket", "err", err)
		}
	}
	if err := boxname.RemoveDir(b.dir); err != nil {
		b.logger().Warn("removing the box's directory", "err", err)
	}
}

// logger is the Runtime's logger, for this box.
func (b *box) logger() *slog.Logger { return b.r.logger().With("box", b.name) }

// logger is the Runtime's logger (Logger, else slog.Default()).
func (r *Runtime) logger() *slog.Logger {
	l := r.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("backend", "docker")
}
