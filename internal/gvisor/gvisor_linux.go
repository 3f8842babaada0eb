package gvisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/scratch"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Runtime starts boxes with one runsc binary. Its zero value finds runsc
// as FindRunsc does and keeps state under StateDir.
type Runtime struct {
	// Runsc is the runsc binary; empty means DefaultRunsc where make
	// runsc installed it, else "runsc" on PATH (FindRunsc).
	Runsc string
	// Platform is runsc's platform (ptrace, systrap, kvm); empty is
	// runsc's default.
	Platform string
	// Stream makes sessions speak to their agent over the stream
	// transport (agent.Frame.Stream, nsinit.Config.Stream) instead of
	// passing descriptors: every process's stdio is then a pipe inside the
	// box that the agent relays over the control connection, so no
	// descriptor of the host's is left in the box but that connection,
	// which runsc would re-donate at a restore, so Checkpoint saves such a
	// box whole, its processes' memory too, and a restored session takes
	// over its agent's stream (see docs/backends.md, "Checkpoint and
	// restore"). The sandbox package makes it the backend's default
	// (sandbox.SessionTransport). The user's agent still hides the agent
	// (nsinit.Config.HideAgent). With the egress proxy the bridge, which
	// the user's agent then serves, opens a stream channel per connection
	// that the session relays to the box's proxy socket
	// (agent.Frame.EgressChannels): no host socket enters the box.
	Stream bool
	// Compression is how Checkpoint writes a box's memory where its
	// runsc can choose (features.compression); empty is CompressionNone.
	// Restore reads either kind whatever it says: each checkpoint's
	// record says which it is.
	Compression Compression
	// Logger receives the warnings of cleanups nobody waits on (a runsc
	// container, mount or directory left behind), with the box's id (nil:
	// slog.Default()).
	Logger *slog.Logger

	once     sync.Once
	template rootfs.Template
	err      error

	// defaultPlatform is each runsc binary's default platform, or a read
	// of it under way (Runtime.platform); platformMu is held only to read
	// or write the map, never across the read.
	platformMu      sync.Mutex
	defaultPlatform map[runscKey]platformRead

	// control is what the probe of each runsc binary found of its
	// sentries' control socket, or a probe under way (speaksControl);
	// controlMu is held only to read or write the map, never across the
	// probe.
	controlMu sync.Mutex
	control   map[runscKey]controlProbe

	// boxes are the live boxes by session, for Checkpoint.
	boxesMu sync.Mutex
	boxes   map[*agent.Session]*box
}

// runscPath is the binary to run (FindRunsc).
func (r *Runtime) runscPath() (string, error) {
	return FindRunsc(r.Runsc)
}

// args are runsc's global flags, then rest.
func (r *Runtime) args(rest ...string) []string {
	a := []string{"--root", runscRoot, "--network=none"}
	if r.Platform != "" {
		a = append(a, "--platform="+r.Platform)
	}
	return append(a, rest...)
}

// prepare removes what dead Wardens left and finds or writes the root
// template, once per process.
func (r *Runtime) prepare(runsc string) (rootfs.Template, error) {
	r.once.Do(func() {
		if r.err = os.MkdirAll(StateDir, 0o700); r.err != nil {
			return
		}
		r.removeStale(runsc)
		r.template, r.err = rootfs.SharedTemplate(StateDir)
		if r.err != nil {
			r.err = fmt.Errorf("writing the root template: %w", r.err)
		}
	})
	return r.template, r.err
}

// box is one runsc container and what the host keeps for it.
type box struct {
	r     *Runtime
	runsc string
	id    string
	dir   string
	cmd   *exec.Cmd
	log   *os.File
	att   *egress.Attachment
	// bin is the runsc binary the box was made with (the file at runsc
	// then), which keys what is known of its sentry and platform: a
	// binary replaced at the same path later runs none of this box. The
	// stale sweep's boxes, which never pause, have none.
	bin runscKey
	// exited is closed when runsc run has returned.
	exited chan struct{}
	// ctl is the host's end of the control connection.
	ctl *os.File
	// forced says runsc run was killed rather than left to return;
	// sentryKilled that kill killed its paused sentry, or every process
	// of its frozen cgroup (endPause). Either
	// leaves runsc's container to cleanup's runsc delete --force.
	forced, sentryKilled bool
	// logTail is the end of runsc's log, kept by cleanup for explain.
	logTail []byte
	// restored says runsc restores the box (Runtime.Restore): its agent
	// sends no ready event, so runsc's failure to restore shows only in
	// its end, and runscEnd, set when runsc exits, is the last line of its
	// log, for Frame.Ended.
	restored bool
	runscEnd string
	// loaded, for a box restored with --background, is closed once its
	// memory's load has ended (Runtime.Loaded); nil otherwise.
	loaded chan struct{}
	// root holds the shared lock on a template's root
	// (rootfs.HoldImageTemplate), so gc of any store leaves it while the
	// box lives; nil on the host's root.
	root *os.File
	// spec is the spec of the box's session.
	spec spec.Spec
	// sess is the box's session once attached (Runtime.track).
	sess *agent.Session
	// dirMu is held by a checkpoint while it copies the scratch, which
	// cleanup removes only once it is free.
	dirMu sync.Mutex
	// pz is how the box is paused (pause_linux.go).
	pz pauser
}

// Start builds a box for a session of s and returns once its agent is
// ready; ctx bounds the start only.
func (r *Runtime) Start(ctx context.Context, s spec.Spec) (*agent.Session, error) {
	b, tmpl, err := r.newBox(s)
	if err != nil {
		return nil, err
	}
	ctl, err := b.start(s, tmpl)
	if err != nil {
		b.cleanup()
		return nil, err
	}
	sess, err := agent.Attach(ctx, b.frame(s, ctl))
	if err != nil {
		return nil, b.explain(err)
	}
	r.track(sess, b)
	return sess, nil
}

// newBox checks s and names a new box for it, with the root template
// and the runsc binary it is to run (box.bin).
func (r *Runtime) newBox(s spec.Spec) (*box, rootfs.Template, error) {
	if err := s.ValidateSandbox(); err != nil {
		return nil, rootfs.Template{}, err
	}
	if s.Workspace != "" {
		return nil, rootfs.Template{}, fmt.Errorf("%w: the gvisor backend does not mount a host --workspace yet; copy files in through the session's file API instead", spec.ErrInvalid)
	}
	if s.Scratch != "" {
		return nil, rootfs.Template{}, fmt.Errorf("%w: the gvisor backend keeps its writable space in its own scratch; it takes no host scratch", spec.ErrInvalid)
	}
	runsc, err := r.runscPath()
	if err != nil {
		return nil, rootfs.Template{}, err
	}
	tmpl, err := r.prepare(runsc)
	if err != nil {
		return nil, rootfs.Template{}, err
	}
	bin, err := runscKeyOf(runsc)
	if err != nil {
		return nil, rootfs.Template{}, fmt.Errorf("starting a gVisor box: %w (is runsc being reinstalled? retry, or install it again: make runsc)", err)
	}
	b := &box{r: r, runsc: runsc, bin: bin, id: boxname.Box(), exited: make(chan struct{}), spec: s}
	b.dir = filepath.Join(StateDir, "box-"+b.id)
	return b, tmpl, nil
}

// frame is the agent.Frame of the box, a session of s, whose host end of
// the control connection is ctl.
func (b *box) frame(s spec.Spec, ctl *os.File) agent.Frame {
	return agent.Frame{
		Spec: s, Control: ctl, Stream: b.r.Stream, UID: nsinit.SandboxUID, GID: nsinit.SandboxGID,
		// Over the stream the bridge reaches the proxy by channels the
		// session relays; over descriptors by its egress link.
		Egress: b.att, EgressChannels: b.att != nil && b.r.Stream,
		Env:           func(extra []string) []string { return agent.ImageEnv(b.att != nil, s.Root.Env, extra) },
		Log:           b.logger(),
		OpenWorkspace: func() (*os.File, error) { return rootfs.OpenScratchWorkspace(filepath.Join(b.dir, "scratch")) },
		Kill:          b.kill,
		Exited:        b.exited,
		Ended:         b.ended,
		// runsc run exits with its container's init's status.
		ExitCode: func() int { return b.cmd.ProcessState.ExitCode() },
		Cleanup:  b.cleanup,
		Pause:    b.pause,
		Resume:   b.resume,
		// kill ends a paused box itself (endPause).
		KillsPaused: true,
	}
}

// start writes the bundle and starts runsc with the control socket as the
// init's stdin; it returns the host's end.
func (b *box) start(s spec.Spec, tmpl rootfs.Template) (*os.File, error) {
	if err := b.build(s, tmpl, func(dir string) error { return scratch.SeedBox(dir, s.Root) }); err != nil {
		return nil, err
	}
	att, err := agent.AttachEgressFor(b.id, s)
	if err != nil {
		return nil, err
	}
	b.att = att
	host, err := b.launch("run", "--bundle", b.dir, b.id)
	if err != nil {
		return nil, err
	}
	// gVisor (2022) lets every user read every task's /proc files and
	// change its scheduling, so the agent hides itself from the user's PID
	// namespace (nsinit.Config.HideAgent).
	boot := agent.BoxedConfig(s, true, true)
	boot.HideAgent = true
	// gVisor's own kernel answers sysinfo(2) with the box's figures, and
	// it refuses the seccomp listener the init would answer it through.
	boot.KernelSysinfo = true
	boot.Stream = b.r.Stream
	if err := agent.HandOverBoxed(host, boot, b.att); err != nil {
		host.Close()
		return nil, err
	}
	b.ctl = host
	return host, nil
}

// build makes the box's directory: its scratch tmpfs, filled by fill, and
// the bundle's config.json.
func (b *box) build(s spec.Spec, tmpl rootfs.Template, fill func(scratch string) error) error {
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		return err
	}
	if err := rootfs.MountScratch(filepath.Join(b.dir, "scratch"), s.Limits.DiskBytes, s.Limits.Inodes(), nsinit.SandboxUID, nsinit.SandboxGID); err != nil {
		return err
	}
	if err := fill(filepath.Join(b.dir, "scratch")); err != nil {
		return err
	}
	self, err := nsinit.BinaryPath()
	if err != nil {
		return err
	}
	if !s.Root.IsHost() {
		if tmpl, b.root, err = rootfs.HoldImageTemplate(StateDir, s.Root); err != nil {
			return err
		}
	}
	bundle := Bundle{
		Root: tmpl.Dir, Binds: tmpl.Binds, From: tmpl.From, VarTmp: tmpl.VarTmp, Scratch: filepath.Join(b.dir, "scratch"), ScratchDirs: rootfs.ScratchDirs,
		Init: self, InitPath: nsinit.BoxedPath, Args: []string{nsinit.BoxedPath, nsinit.BoxedStdin},
		CgroupsPath: cgroupsPath(b.id), Limits: s.Limits,
	}
	cfgJSON, err := json.Marshal(bundle.Spec())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, "config.json"), cfgJSON, 0o600)
}

// launch starts runsc with args (run or restore) and the child's end of a
// new control socketpair as the container's stdin; it returns the host's
// end.
func (b *box) launch(args ...string) (*os.File, error) {
	host, child, err := socketpair()
	if err != nil {
		return nil, err
	}
	defer child.Close()
	if b.log, err = os.Create(filepath.Join(b.dir, "runsc.log")); err != nil {
		host.Close()
		return nil, err
	}
	b.cmd = exec.Command(b.runsc, b.r.args(args...)...)
	b.cmd.Stdin, b.cmd.Stdout, b.cmd.Stderr = child, b.log, b.log
	b.cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := b.cmd.Start(); err != nil {
		host.Close()
		return nil, fmt.Errorf("starting runsc: %w", err)
	}
	go func() {
		// runsc's own failures are in its log (explain), not in Wait's
		// error.
		_ = b.cmd.Wait()
		if b.restored {
			b.runscEnd = lastLine(tail(b.log))
		}
		close(b.exited)
	}()
	b.checkBinary()
	return host, nil
}

// checkBinary makes sure the runsc launch started is the binary the box
// was made with (bin): one replaced at its path between newBox and the
// exec started another file, of whose sentry and platform what is known
// of bin says nothing, so such a box never freezes and never asks its
// sentry directly, only runsc pause, which any runsc can. The file is
// read after the exec: one that is still bin is the one exec ran.
func (b *box) checkBinary() {
	if err := b.sameBinary(); err != nil {
		b.pz.noFreezer, b.pz.noControl = true, true
		b.logger().Warn("runsc was replaced while the box started; it pauses with runsc pause", "err", err)
	}
}

func socketpair() (host, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control"), nil
}

// cgroupsPath puts the box's cgroup next to the native sandboxes', under
// this process's own cgroup in each hierarchy (runsc reads a relative
// path so), named as theirs are (<pid>-<hex>), so cgroup.Stale and
// doctor --leaks find it if this Warden dies.
func cgroupsPath(id string) string { return "warden/" + cgroupName(id) }

// cgroupName is the name of the box's cgroup in warden/, the one
// cgroup.OpenFreezer takes.
func cgroupName(id string) string { return strings.TrimPrefix(id, boxname.Prefix) }

// killTimeout bounds each runsc command the host runs to end a box.
const killTimeout = 10 * time.Second

// kill ends every process of the box: runsc kills the container's
// processes and runsc run, seeing its container end, deletes it and
// returns. Only a run that does not return soon is killed itself, which
// leaves the deletion to cleanup (a killed run makes it slow).
func (b *box) kill() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.exited:
		return
	default:
	}
	// A paused box is ended where it stands, never let run again
	// (Frame.KillsPaused).
	b.endPause()
	// The agent is PID 1: once its control connection shuts, it exits and
	// gVisor ends every process of the box with it, without a runsc kill.
	if b.ctl != nil {
		if err := agent.ShutdownControl(b.ctl); err != nil && !errors.Is(err, os.ErrClosed) {
			b.logger().Warn("shutting the box's control connection", "err", err)
		}
	}
	select {
	case <-b.exited:
		return
	case <-time.After(runExitGrace):
	}
	if err := b.runscCmd("kill", "--all", b.id, "KILL"); err != nil {
		b.logger().Warn("runsc kill failed; runsc run is killed if it has not ended within 3 s", "err", err)
	}
	select {
	case <-b.exited:
	case <-time.After(runExitGrace):
		b.forced = true
		if err := b.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			b.logger().Warn("killing runsc run", "err", err)
		}
	}
}

// runExitGrace is how long runsc run gets to return once its container
// was killed.
const runExitGrace = 3 * time.Second

func (b *box) runscCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	return b.runscCtx(ctx, args...)
}

// runscCtx runs one runsc command on the box, bounded by ctx, and says
// what runsc said when it fails.
func (b *box) runscCtx(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, b.runsc, b.r.args(args...)...).CombinedOutput()
	if err == nil {
		return nil
	}
	if said := bytes.TrimSpace(out); len(said) > 0 {
		return fmt.Errorf("runsc %s: %w: %s", args[0], err, said)
	}
	return fmt.Errorf("runsc %s: %w", args[0], err)
}

// cleanup removes the container, the scratch tmpfs and the box's
// directory (boxname.RemoveDir, which leaves a directory that still holds
// a mount to the stale sweep); it is safe at any stage of start.
func (b *box) cleanup() {
	if b.cmd != nil && b.cmd.Process != nil {
		b.kill()
		<-b.exited
		// runsc run deletes its container when it ends by itself; a
		// restored box's record stays after runsc restore ends, and a
		// killed sentry's after runsc run does.
		if b.forced || b.restored || b.sentryKilled {
			if err := b.runscCmd("delete", "--force", b.id); err != nil && !strings.Contains(err.Error(), "does not exist") {
				b.logger().Warn("deleting the box's runsc container", "err", err)
			}
		}
	}
	if b.att != nil {
		if err := b.att.Close(); err != nil {
			b.logger().Warn("closing the box's egress proxy socket", "err", err)
		}
	}
	if b.root != nil {
		if err := b.root.Close(); err != nil {
			b.logger().Warn("releasing the box's template root", "err", err)
		}
	}
	if b.log != nil {
		b.logTail = tail(b.log)
		b.log.Close()
	}
	b.r.untrack(b)
	b.dirMu.Lock()
	defer b.dirMu.Unlock()
	if err := boxname.RemoveDir(b.dir); err != nil {
		b.logger().Warn("removing the box's directory", "err", err)
	}
}

// ended is how runsc ended, once it has (Frame.Ended), with the last
// line of its log for a restored box.
func (b *box) ended() string {
	if b.runscEnd == "" {
		return b.cmd.ProcessState.String()
	}
	return b.cmd.ProcessState.String() + "; runsc: " + b.runscEnd
}

// lastLine is the last line of log, one line at most maxLogTail bytes.
func lastLine(log []byte) string {
	if i := bytes.LastIndexByte(log, '\n'); i >= 0 {
		log = log[i+1:]
	}
	return strings.ToValidUTF8(string(bytes.TrimSpace(log)), "?")
}

// logger is the Runtime's logger, for this box.
func (b *box) logger() *slog.Logger { return b.r.logger().With("box", b.id) }

// explain adds what runsc said to an error of a box that never became
// ready; runsc reports its own failures only in its log.
func (b *box) explain(err error) error {
	if len(b.logTail) == 0 {
		return err
	}
	return errors.Join(err, fmt.Errorf("runsc: %s", b.logTail))
}

// maxLogTail bounds what of runsc's log an error repeats.
const maxLogTail = 2048

func tail(f *os.File) []byte {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return nil
	}
	b = bytes.TrimSpace(b)
	if len(b) > maxLogTail {
		b = b[len(b)-maxLogTail:]
	}
	return b
}
