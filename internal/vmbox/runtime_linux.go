package vmbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/scratch"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/vmguest"
)

// Runtime starts boxes as microVMs. Its zero value is ready: the root
// template, the guest initramfs and the kernel are found on first use.
type Runtime struct {
	// Logger receives the warnings of cleanups nobody waits on, with the
	// box's id (nil: slog.Default()).
	Logger *slog.Logger

	once     sync.Once
	template rootfs.Template
	init     *guestInit
	err      error
}

// Share tags: the box's root and its scratch.
const (
	rootTag    = "root"
	scratchTag = "scratch"
)

// roCache is the 9p cache mode of the read-only shares: the root never
// changes under a box (a template root is replaced, never edited), so the
// guest may keep what it read ("loose"); the scratch is "none", since
// the host's file API writes it too.
const roCache = "loose"

// guestMiB is the guest's own need on top of the box's --memory: its
// kernel, page tables and the agent, measured at about 30 MiB of an idle
// 256 MiB guest (MemTotal - MemAvailable), with room to spare.
const guestMiB = 48

// bootTimeout bounds a box's boot to the guest's hello: the launcher's
// default (10 s) was overrun under TCG on this 2-core host while a test
// suite booted VMs back to back (boots of 2-4 s there took over 10 s).
const bootTimeout = 30 * time.Second

// hostAgentWrite bounds the host's writes of the boot message and the
// agent's Config on the port, which a live guest reads at once.
const hostAgentWrite = 10 * time.Second

// prepare writes the root template and opens the guest's init, once
// per process.
func (r *Runtime) prepare() (rootfs.Template, *guestInit, error) {
	r.once.Do(func() {
		if r.err = makeStateDir(); r.err != nil {
			return
		}
		r.removeStale(StateDir)
		if r.template, r.err = rootfs.SharedTemplate(StateDir); r.err != nil {
			r.err = fmt.Errorf("writing the root template: %w", r.err)
			return
		}
		r.init, r.err = openGuestInit(StateDir, r.logger())
	})
	return r.template, r.init, r.err
}

// makeStateDir makes StateDir root's alone (0700): QEMU reaches its
// shares through copies its launcher binds into QEMU's own mount
// namespace, so no other uid needs to look in, and no box's QEMU or host
// user may list or reach another box's scratch.
func makeStateDir() error {
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(StateDir, 0, 0); err != nil {
		return err
	}
	return os.Chmod(StateDir, 0o700)
}

// box is one microVM and what the host keeps for it.
type box struct {
	r     *Runtime
	id    string
	dir   string
	lease *hostid.Lease
	vm    *microvm.VM
	// att is the box's socket on the egress proxy with --net proxy.
	att *egress.Attachment
	// times are the steps of its start so far (phases).
	times *phases
	// ctl is the host's end of the agent port until the session owns it.
	ctl *os.File
	// tmplRoot holds the shared lock on a template's root
	// (rootfs.HoldImageTemplate) while the box's root binds it, so no
	// store's gc removes it; nil on the host's root.
	tmplRoot *os.File
}

// Start boots a VM for a session of s and returns once its agent is
// ready. ctx bounds only the agent's attach: the boot itself runs under
// the backend's own bootTimeout (the VM outlives ctx, which is often a
// request's), and the session's life is its own, ended by Kill or the
// VM's exit.
func (r *Runtime) Start(ctx context.Context, s spec.Spec) (*agent.Session, error) {
	sess, _, err := r.start(ctx, s)
	return sess, err
}

// start is Start, also returning how long each step took.
func (r *Runtime) start(ctx context.Context, s spec.Spec) (*agent.Session, *phases, error) {
	if err := refuse(s); err != nil {
		return nil, nil, err
	}
	b := &box{r: r, id: boxname.Box(), times: newPhases()}
	tmpl, gi, err := r.prepare()
	if err != nil {
		return nil, nil, err
	}
	b.times.mark("prepare")
	b.dir = filepath.Join(StateDir, "box-"+b.id)
	if err := b.start(s, tmpl, gi); err != nil {
		b.cleanup()
		return nil, nil, err
	}
	f := b.frame(s)
	b.ctl = nil // the session's from here on
	sess, err := agent.Attach(ctx, f)
	if err != nil {
		return nil, nil, fmt.Errorf("%w; guest console: %s", err, strings.Join(b.vm.Console(), " | "))
	}
	b.times.mark("attach")
	b.logger().Debug("microVM box started", b.times.attrs()...)
	return sess, b.times, nil
}

// frame is the agent.Frame of the box, a session of s: the session's
// host end is the agent port (b.ctl), over which the box's egress bridge
// opens its channels, which only a box with the proxy may.
func (b *box) frame(s spec.Spec) agent.Frame {
	return agent.Frame{
		Spec: s, Control: b.ctl, Stream: true, GuestOOMs: true, UID: b.lease.ID(), GID: b.lease.ID(),
		Egress: b.att, EgressChannels: b.att != nil,
		Env:           func(extra []string) []string { return agent.ImageEnv(b.att != nil, s.Root.Env, extra) },
		Log:           b.logger(),
		OpenWorkspace: func() (*os.File, error) { return rootfs.OpenScratchWorkspace(filepath.Join(b.dir, "scratch")) },
		Kill:          b.vm.Kill,
		Exited:        b.vm.Done(),
		Ended:         b.ended,
		Cleanup:       b.cleanup,
		Pause:         b.vm.Pause,
		Resume:        b.vm.Resume,
	}
}

// refuse says, in one line, what of s this backend does not do yet.
func refuse(s spec.Spec) error {
	if err := s.ValidateSandbox(); err != nil {
		return err
	}
	switch {
	case s.Workspace != "":
		return fmt.Errorf("%w: the microvm backend does not share a host --workspace yet; copy files in through the session's file API instead", spec.ErrInvalid)
	case s.Scratch != "":
		return fmt.Errorf("%w: the microvm backend keeps its writable space in its own scratch; it takes no host scratch", spec.ErrInvalid)
	}
	return nil
}

// start makes the scratch (seeded from a template's home and
// /workspace), assembles the root (a template's held against gc), boots
// the VM with the shares, and hands the guest its boot message and the
// agent its Config.
func (b *box) start(s spec.Spec, tmpl rootfs.Template, gi *guestInit) error {
	// The proxy first: a rule only its parser refuses costs no mount.
	att, err := agent.AttachEgressFor(b.id, s)
	if err != nil {
		return err
	}
	b.att = att
	scratchDir, err := b.makeScratch(s.Limits)
	if err != nil {
		return err
	}
	if err := scratch.SeedBox(scratchDir, s.Root); err != nil {
		return err
	}
	b.times.mark("scratch")
	accel := microvm.HostAccel().Accel
	k, args, err := microvm.GuestKernel(accel)
	if err != nil {
		return err
	}
	kf, err := k.Open()
	if err != nil {
		return err
	}
	defer b.closeLogged(kf, "the guest kernel")
	initrd, err := gi.open()
	if err != nil {
		return err
	}
	defer b.closeLogged(initrd, "the guest initramfs")
	b.times.mark("kernel_initrd")
	root := filepath.Join(b.dir, "root")
	if tmpl, err = b.makeRoot(s.Root, tmpl, root); err != nil {
		return err
	}
	b.times.mark("root")
	boot, shares := layout(tmpl, root, scratchDir, s.Limits)
	cfg := microvm.Config{
		KernelFile: kf, KernelArgs: args, InitrdFile: initrd, ID: b.lease, Shares: shares,
		MemoryMiB: memoryMiB(s.Limits), CPUs: vCPUs(s.Limits, accel), CPUQuota: cpuQuota(s.Limits, accel), BootTimeout: bootTimeout,
	}
	if b.vm, err = b.startVM(cfg, gi); err != nil {
		return err
	}
	b.times.mark("boot")
	b.times.vm = b.vm.Boot()
	if err := b.handOver(s, boot); err != nil {
		return err
	}
	b.times.mark("handover")
	return nil
}

// makeRoot assembles the box's root at dir from the host's root
// template, or on a template from its shared root, which the box holds
// (b.tmplRoot) so no store's gc removes it under the bind; it returns the
// root template used.
func (b *box) makeRoot(r spec.Root, host rootfs.Template, dir string) (rootfs.Template, error) {
	tmpl := host
	if !r.IsHost() {
		var err error
		if tmpl, b.tmplRoot, err = rootfs.HoldImageTemplate(StateDir, r); err != nil {
			return tmpl, err
		}
	}
	return tmpl, assembleRoot(tmpl, dir)
}

// makeScratch makes the box's directory (root's alone), leases the box's
// uid and mounts the scratch owned by it; the scratch's root is the
// lease's alone too (0700), since its tmp is 1777 and its paths show in
// mountinfo and QEMU's command line: no other uid, host user or other
// box's QEMU, is to reach it.
func (b *box) makeScratch(l spec.Limits) (string, error) {
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		return "", err
	}
	var err error
	if b.lease, err = hostid.Take(); err != nil {
		return "", err
	}
	scratch := filepath.Join(b.dir, "scratch")
	if err := rootfs.MountScratch(scratch, l.DiskBytes, l.Inodes(), b.lease.ID(), b.lease.ID()); err != nil {
		return "", err
	}
	if err := os.Chmod(scratch, 0o700); err != nil {
		return "", fmt.Errorf("making the scratch its box's alone: %w", err)
	}
	return scratch, nil
}

// layout is the guest's boot message and the shares it names: the box's
// root (assembled on the host, read-only) and its scratch; the message
// carries the box's memory limit l.
func layout(tmpl rootfs.Template, root, scratch string, l spec.Limits) (vmguest.Boot, []microvm.Share) {
	boot := vmguest.Boot{Root: rootTag, Scratch: scratchTag, ScratchDirs: rootfs.ScratchDirs, VarTmp: tmpl.VarTmp, Cache: roCache, Hostname: agent.Hostname, MemoryBytes: boxMemory(l)}
	return boot, []microvm.Share{{Tag: rootTag, Dir: root, ReadOnly: true}, {Tag: scratchTag, Dir: scratch}}
}

// handOver sends the boot message and the agent's Config on the port,
// and keeps a descriptor of the port for the session.
func (b *box) handOver(s spec.Spec, boot vmguest.Boot) error {
	msg, err := boot.Marshal()
	if err != nil {
		return err
	}
	conn := b.vm.Stream()
	if err := conn.SetWriteDeadline(time.Now().Add(hostAgentWrite)); err != nil {
		return err
	}
	if _, err := conn.Write(msg); err != nil {
		return fmt.Errorf("sending the guest its boot message: %w", err)
	}
	if err := conn.SetWriteDeadline(time.Time{}); err != nil {
		return err
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("the agent port is a %T, not a unix socket", conn)
	}
	if b.ctl, err = uc.File(); err != nil {
		return fmt.Errorf("the agent port: %w", err)
	}
	return agent.HandOverBoxed(b.ctl, b.config(s), b.att)
}

// config is the guest agent's Config for a session of s: over the stream,
// as the box's lease, and with the egress bridge's port, pace and proxy
// env only when s asks for the proxy (agent.BoxedConfig).
func (b *box) config(s spec.Spec) nsinit.Config {
	cfg := agent.BoxedConfig(s, false, true)
	cfg.Stream = true
	// The guest's kernel is the box's own: sysinfo(2) tells the VM's
	// memory and CPUs (the VM's RAM, --memory plus guestMiB less what the
	// guest kernel keeps, not --memory itself; the vCPUs), no host
	// figure, so the filter lets the call through as on gVisor. The agent
	// need not hide: the box has no other kernel sharing tasks with the
	// host, and its /proc and devices are its own (HideAgent stays off;
	// it cannot serve the stream anyway).
	cfg.KernelSysinfo = true
	cfg.UID, cfg.GID = b.lease.ID(), b.lease.ID()
	// The guest init put the agent in the box's memory cgroup and passes
	// its memory.events on: the agent reports the OOM kills there.
	cfg.MemoryEvents = true
	return cfg
}

// memoryMiB is the VM's RAM: the box's memory (boxMemory) rounded up to
// MiB, and the guest's own need (guestMiB).
func memoryMiB(l spec.Limits) int {
	return int((boxMemory(l)+(1<<20)-1)>>20) + guestMiB
}

// boxMemory is the memory.max of the box's cgroup in the guest: --memory,
// or the launcher's default for a box without a limit.
func boxMemory(l spec.Limits) int64 {
	if l.MemoryBytes <= 0 {
		return microvm.DefaultMemoryMiB << 20
	}
	return l.MemoryBytes
}

// vCPUs is the VM's vCPU count: --cpus rounded up, but one under TCG,
// where more hang the boot (microvm.Config.checkAccel).
func vCPUs(l spec.Limits, accel microvm.Accel) int {
	if accel == microvm.TCG || l.CPUs <= 0 {
		return 1
	}
	return int(math.Ceil(l.CPUs))
}

// cpuQuota is the CPU time of QEMU's cgroup: --cpus itself, so a
// fraction of a CPU is kept (the vCPUs are rounded up), but no more than
// the vCPUs (under TCG one, however many --cpus asks for); 0 (no limit)
// leaves it at the vCPUs.
func cpuQuota(l spec.Limits, accel microvm.Accel) float64 {
	return math.Min(l.CPUs, float64(vCPUs(l, accel)))
}

// ended says how the VM ended, once it has.
func (b *box) ended() string {
	if err := b.vm.Wait(); err != nil {
		return "QEMU: " + err.Error()
	}
	return "the VM ended"
}

// cleanup kills the VM, closes its egress proxy socket and removes the
// scratch and the box's directory; it is safe at any stage of start.
func (b *box) cleanup() {
	if b.vm != nil {
		b.vm.Kill()
		<-b.vm.Done()
	}
	b.closeEgress()
	if b.ctl != nil {
		if err := b.ctl.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			b.logger().Warn("closing the agent port", "err", err)
		}
	}
	if err := removeBox(b.dir); err != nil {
		// The id may still own files in the scratch: keeping the lease
		// for the process's life stops another box getting them. The
		// root may still bind a template's: its lock goes with the box,
		// but gc keeps a root a box directory's root binds
		// (boundRoots), so none removes files through the bind.
		b.logger().Warn("leaving the box's directory and keeping its uid leased", "dir", b.dir, "err", err)
		return
	}
	if b.tmplRoot != nil {
		// after the root is unmounted: nothing binds the template's root
		if err := b.tmplRoot.Close(); err != nil {
			b.logger().Warn("releasing the box's template root", "err", err)
		}
	}
	if b.lease != nil {
		// after the scratch is gone: no file of the id is left
		b.lease.Release()
	}
}

// closeLogged closes the host's copy of a file the launcher took its own
// of, logging a failure, which nothing waits on.
func (b *box) closeLogged(f *os.File, what string) {
	if err := f.Close(); err != nil {
		b.logger().Warn("closing "+what, "err", err)
	}
}

// logger is the Runtime's logger, for this box.
func (b *box) logger() *slog.Logger { return b.r.logger().With("box", b.id) }

// WarmUp is the command a pooled box runs before it is handed out
// (sandbox.Warmer): a fresh guest's first exec pays the agent's first
// spawn and reading the dynamic loader and libc over 9p into the guest's
// page cache (kept there: the root's cache mode is loose), 0.38-0.93 s
// against 0.1 s for a later one (docs/performance.md). /bin/true pays
// both and does nothing else.
func WarmUp() []string { return []string{"/bin/true"} }
