package native

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fastRun is a one-shot run that warden-exec builds: the plan prepared
// before the clone, and the plan as sent, whose ops word the executor's
// status.
type fastRun struct {
	plan *nsinit.FastPlan
	sent *plan.Plan
}

// chooseExecutor sets b.fast when the run's executor is warden-exec
// (Executor.pick), which needs cfg, the Config the Go init would get; it
// then sizes cfg's RLIMIT_NPROC for warden-exec's one task.
func (b *box) chooseExecutor(cfg *nsinit.Config) error {
	if b.rt.Executor == ExecutorGo {
		return nil
	}
	var f *fastRun
	var whyNot error
	if b.rt.ListenerStdin != nil {
		whyNot = errListenerNotFast
	} else {
		f, whyNot = newFastRun(cfg)
	}
	e, err := b.rt.Executor.pick(whyNot)
	if err != nil {
		return err
	}
	if e == ExecutorFast {
		b.fast = f
		cfg.Rlimits.Processes = b.nprocWith(execTasks)
	}
	return nil
}

// start starts the chosen executor (startInit). Under auto, a warden-exec
// gone since chooseExecutor's check (nsinit.ErrNoExecutor, from this
// process or the spawner) is no failure: the run is started once more
// with the Go init and a fresh cfg, as auto would have chosen had it been
// gone at the check. Under fast the error stands.
func (b *box) start(cfg *nsinit.Config) (*initProc, error) {
	proc, err := launch(b)
	if err == nil || b.fast == nil || b.rt.Executor == ExecutorFast || !errors.Is(err, nsinit.ErrNoExecutor) {
		return proc, err
	}
	fallbackOnce.Do(func() {
		slog.Warn("warden-exec could not be started: one-shot runs use the Go init; reinstall warden-exec from the same build as warden (make build)", "err", err)
	})
	b.fast = nil
	*cfg = b.config()
	return launch(b)
}

// errListenerNotFast is why a run with Runtime.ListenerStdin takes the
// Go init: it points its own fd 0 at /dev/null once the program is
// started, so the box's PID 1 keeps no copy of the listener, while
// warden-exec's PID 1 would keep it for the box's life.
var errListenerNotFast = &nsinit.NotFastError{Feature: "a listener as stdin", Detail: "--stdin-listener: warden-exec's PID 1 would keep it"}

// fallbackOnce logs start's first fallback to the Go init: in serve or
// mcp every later run would repeat it.
var fallbackOnce sync.Once

// launch is startInit, which a test replaces to start nothing.
var launch = startInit

// execTasks is warden-exec's own share of RLIMIT_NPROC rootless: PID 1 is
// one single-threaded process, where the Go init needs initTasks, so the
// program gets exactly its --pids, as it does under root.
const execTasks = 1

// newFastRun is cfg's fast run, or why warden-exec cannot build it. The
// executor is looked for here so that auto falls back before the clone;
// whoever starts it (this process, or the spawner beside the same
// executable) finds it again under the same rule (spawn.Command).
func newFastRun(cfg *nsinit.Config) (*fastRun, error) {
	if err := fastHierarchy(cgroup.Version()); err != nil {
		return nil, err
	}
	if _, err := nsinit.Executor(); err != nil {
		return nil, err
	}
	fp, err := nsinit.ExecPlan(cfg)
	if err != nil {
		return nil, err
	}
	return &fastRun{plan: fp}, nil
}

// fastHierarchy refuses warden-exec on a host whose cgroup hierarchy
// (cgroup.Version) the differential test has not covered: auto may pick
// fast only where that test passes, and it runs on v1 hosts only so far.
func fastHierarchy(version string) error {
	if version == "v2" {
		return errors.New("cgroup v2 hosts are not yet covered by the differential test (auto uses the Go init there)")
	}
	return nil
}

// handOverPlan sends warden-exec its plan and, on v1, the cgroup's tasks
// descriptors. The v1 cgroup is made first, while the executor starts,
// as the plan names its memory usage file for the sysinfo answerer.
func (b *box) handOverPlan() error {
	if b.lateCgroup {
		if err := b.makeLateCgroup(); err != nil {
			return err
		}
	}
	b.fast.sent = b.fast.plan.Plan(b.usageFile(), b.spec.Limits.OutputBytes)
	enc, err := plan.Encode(b.fast.sent)
	if err != nil {
		return fmt.Errorf("encoding the sandbox plan: %w", err)
	}
	if err := plan.Send(b.ctlHost, enc); err != nil {
		return fmt.Errorf("sending the sandbox plan: %w", err)
	}
	if b.lateCgroup {
		return b.sendCgroupFiles()
	}
	return nil
}

// usageFile is the host path of the v1 cgroup's memory usage, which the
// Go init's answerer opens from the tasks descriptors it receives (the
// first in ThreadFiles' order with one beside it): "" on v2, where the Go
// init has none either, and without a cgroup or a memory controller.
// The Go init's open is best-effort, so a file the box's root could not
// open (boxCanRead) is left out here rather than failing the plan's
// OpenFD where the Go init would start the program without it.
func (b *box) usageFile() string {
	if !b.lateCgroup || b.cg == nil {
		return ""
	}
	for _, tasks := range b.cg.Placement().ThreadFiles {
		u := filepath.Join(filepath.Dir(tasks), "memory.usage_in_bytes")
		if fi, err := os.Stat(u); err == nil && boxCanRead(fi, b.ids.rootless, os.Geteuid()) {
			return u
		}
	}
	return ""
}

// boxCanRead says whether the box's root, which opens fi before the
// pivot, may read it: rootful it is a pool user, no owner of host files,
// so fi must be readable by others; rootless it is the invoking user
// (euid), who may read its own files with its namespace's capabilities.
func boxCanRead(fi os.FileInfo, rootless bool, euid int) bool {
	if fi.Mode().Perm()&0o004 != 0 {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && rootless && int(st.Uid) == euid
}

// readPlanStatus reads warden-exec's status and turns it into the Status
// the Go init would have sent (nsinit.FromPlan); io.EOF when it ended
// without one.
func (b *box) readPlanStatus(cfg *nsinit.Config) (nsinit.Status, error) {
	st, err := plan.ReadStatus(b.ctlHost)
	if err != nil {
		return nsinit.Status{}, err
	}
	return nsinit.FromPlan(b.fast.sent, st, cfg), nil
}

// FastVerdict is nil when a default one-shot run here (`warden run --
// true`, the default limits, no workspace) would be built by warden-exec,
// else why not: the very checks a run makes (newFastRun, so
// nsinit.ExecPlan's refusals), for doctor to report rather than a list of
// its own.
func FastVerdict() error {
	l := spec.DefaultLimits
	cfg := &nsinit.Config{
		Command: []string{"true"}, Hostname: agent.Hostname, View: agent.View(l),
		Etc:         rootfs.EtcTemplate{Dir: etcBase()},
		AwaitCgroup: cgroup.Version() == "v1",
		DiskBytes:   l.DiskBytes, Inodes: l.Inodes(),
		Rlimits: nsinit.Rlimits{
			CPUSeconds: uint64(l.CPUTime / time.Second), FileSizeBytes: uint64(l.FileSizeBytes),
			OpenFiles: uint64(l.OpenFiles), Processes: uint64(l.Pids),
		},
	}
	_, err := newFastRun(cfg)
	return err
}
