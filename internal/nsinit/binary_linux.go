package nsinit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
)

// InitName is the small init binary (cmd/warden-init) that Warden starts
// as each sandbox's init when it sits next to the warden binary. It holds
// only the init (nsinit, rootfs, seccomp): under a third of warden's
// size, so each sandbox faults in and tears down far fewer pages than when
// warden runs itself as the init, which it still does without one.
const InitName = "warden-init"

var (
	initOnce sync.Once
	// lean is the trusted InitName next to this executable, or "".
	lean string
	// self is this executable's path.
	self string
)

func findInit() {
	initOnce.Do(func() {
		var err error
		if self, err = os.Executable(); err != nil {
			return
		}
		if p := filepath.Join(filepath.Dir(self), InitName); trustedInit(p) {
			lean = p
		}
	})
}

// probeWait bounds the protocol version probe of an init.
const probeWait = 10 * time.Second

// probeInit asks the init at p for its protocol version (see IsProbe),
// once per process, so that an init from another build is found before
// any sandbox, on every backend, even those that cannot tell how a box's
// init ended.
func probeInit(p string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, ProbeArg)
	cmd.Args[0] = Arg0
	cmd.Env = []string{"GOMAXPROCS=1"}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("asking %s for its protocol version: %w (an init from before protocol versioning, or a broken one)", p, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil || uint32(v) != Version {
		return fmt.Errorf("%s speaks protocol version %.20q but warden speaks version %d", p, out, Version)
	}
	return nil
}

// Binary is what to execute as a sandbox's init from this process: the
// small init if there is one, or /proc/self/exe, which stays this very
// binary even if the file is replaced while Warden runs.
func Binary() string {
	findInit()
	if lean != "" {
		return lean
	}
	return "/proc/self/exe"
}

var (
	probeOnce sync.Once
	// boxedLean is lean once it answered the version probe, or "".
	boxedLean string
)

// BinaryPath is the init as a path another process can open (a runtime
// binding it into a box): the small init if it speaks this build's
// protocol (see probeInit), or this executable's path. A runtime's box
// does not tell how its init ended, so an init of another build is found
// here, once per process, rather than by a box that ends unexplained; the
// native path (Binary) reads the init's exit status instead, and pays no
// probe on a one-shot run's start. This executable's path is held to the
// same trust as the small init's (trustedInit): whoever could replace the
// file at it would run code as every later box's init, and the path,
// unlike /proc/self/exe, is opened anew for each box.
func BinaryPath() (string, error) {
	findInit()
	probeOnce.Do(func() {
		if lean == "" {
			return
		}
		if err := probeInit(lean); err != nil {
			slog.Warn("not using the warden-init beside warden in runtime boxes: warden is bound in as the init instead; "+reinstall, "err", err)
			return
		}
		boxedLean = lean
	})
	if boxedLean != "" {
		return boxedLean, nil
	}
	if self == "" || !trustedInit(self) {
		return "", fmt.Errorf("no trusted init to bind into a runtime's box: %q (and any warden-init beside it) must be owned by root or this user, and neither it nor its directory writable by group or others: reinstall warden where that holds", self)
	}
	return self, nil
}

// trustedInit accepts an init only if no one but root or this process's
// user can change it or put another file at its path (OpenTrusted):
// whoever can runs code as every sandbox's init. The init is later
// started by path, which the directory's check keeps pointing at the file
// checked here.
func trustedInit(p string) bool {
	f, err := OpenTrusted(p)
	if err != nil {
		return false
	}
	closeQuietly(f)
	return true
}

// ExecName is the C executor of one-shot sandboxes (cmd/warden-exec),
// looked for next to this executable under InitName's trust rule.
const ExecName = "warden-exec"

var (
	execOnce sync.Once
	execPath string
	// execFDNum is the trusted descriptor of execPath, kept open for
	// this process's life: what is executed. ExecutorBinaryAbove may
	// move it higher (under execFDMu), keeping every earlier one open.
	execFDNum int
	execFDMu  sync.Mutex
	execErr   error
)

// ExecFDMin is the least descriptor number ExecutorBinary's takes, above
// what a process with few descriptors hands a child. os/exec's child
// copies its files first to numbers just above the highest of them, so
// a child given high descriptors (a spawner with many boxes) needs
// ExecutorBinaryAbove.
const ExecFDMin = 256

// execFDHeadroom is how far above a child's reach ExecutorBinaryAbove
// moves the descriptor when it must, so that a process whose descriptors
// grow moves it seldom (each move keeps one descriptor more).
const execFDHeadroom = 256

// Executor is the trusted ExecName beside this executable that reads
// this build's plans, or why there is none, in a line that says how to
// fix it. A warden-exec of another build (plan.Version differs) would
// refuse every plan, so its version is read from its ELF note once per
// process (checkExecVersion), with no exec on a one-shot run's path
// unless warden-exec predates the note:
// auto then takes the Go init, and fast and doctor name the mismatch.
// The path is for messages; ExecutorBinary is what is executed.
func Executor() (string, error) {
	execOnce.Do(func() {
		if execPath, execFDNum, execErr = findExecutor(); execErr != nil {
			execErr = noExecutor{execErr}
		}
	})
	return execPath, execErr
}

// ExecutorBinary is Executor's warden-exec as /proc/self/fd/N of the
// descriptor its trust and note were checked on, kept open for this
// process's life: every run, hours later in serve, executes that very
// inode, never what has since been put at its path.
func ExecutorBinary() (string, error) {
	return ExecutorBinaryAbove(0)
}

// ExecutorBinaryAbove is ExecutorBinary for a child whose start may use
// descriptor numbers up to reach (os/exec's child copies its files to
// the numbers just above the highest of them before it executes): the
// descriptor named is above reach, moved there (a new duplicate, at
// reach+execFDHeadroom or higher) when it is not. An earlier one is
// never closed, since another start may be executing it at that moment.
func ExecutorBinaryAbove(reach int) (string, error) {
	if _, err := Executor(); err != nil {
		return "", err
	}
	execFDMu.Lock()
	defer execFDMu.Unlock()
	if execFDNum <= reach {
		fd, err := unix.FcntlInt(uintptr(execFDNum), unix.F_DUPFD_CLOEXEC, reach+execFDHeadroom)
		if err != nil {
			return "", fmt.Errorf("%s: keeping it above descriptor %d: %w", ExecName, reach, err)
		}
		execFDNum = fd
	}
	return fmt.Sprintf("/proc/self/fd/%d", execFDNum), nil
}

// noExecutor is Executor's error, which matches ErrNoExecutor.
type noExecutor struct{ error }

func (e noExecutor) Unwrap() error { return e.error }

// Is makes every noExecutor match ErrNoExecutor.
func (e noExecutor) Is(target error) bool { return target == ErrNoExecutor }

// findExecutor is Executor's answer, found once: the path and a
// descriptor of it kept open for this process's life.
func findExecutor() (string, int, error) {
	findInit()
	if self == "" {
		return "", 0, fmt.Errorf("%s: cannot find this executable's directory", ExecName)
	}
	p := filepath.Join(filepath.Dir(self), ExecName)
	f, err := OpenTrusted(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", 0, fmt.Errorf("%s not found next to %s; run make build", ExecName, self)
	case err != nil:
		return "", 0, fmt.Errorf("%s: %w", ExecName, err)
	}
	defer closeLogged(f, "closing warden-exec after checking it")
	if err := checkExecMount(f, p); err != nil {
		return "", 0, err
	}
	if err := checkExecVersion(f, p); err != nil {
		return "", 0, err
	}
	// A duplicate at or above ExecFDMin, close-on-exec, never closed.
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, ExecFDMin)
	if err != nil {
		return "", 0, fmt.Errorf("%s: keeping %s open: %w", ExecName, p, err)
	}
	return p, fd, nil
}

// checkExecMount refuses the trusted warden-exec f (at p) on a noexec
// mount, which the kernel would refuse to execute (EACCES) on every run.
func checkExecMount(f *os.File, p string) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("%s: statfs %s: %w", ExecName, p, err)
	}
	if st.Flags&unix.ST_NOEXEC != 0 {
		return fmt.Errorf("%s: %s is on a noexec mount, where it cannot run; install warden's bin/ on a mount without noexec", ExecName, p)
	}
	return nil
}

// checkExecVersion refuses the trusted warden-exec f (at p) unless it
// reads this build's plan version, which its ELF note says (execVersion)
// without running it. A file this machine cannot execute is refused as
// such. A warden-exec without the note (from before it) or one this
// process may not read (execute only) is asked instead (probeExec), at
// the cost of an exec, as every one was before the note.
func checkExecVersion(f *os.File, p string) error {
	r, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return probeExec(p)
	}
	defer closeLogged(r, "closing warden-exec after reading its plan version")
	v, err := execVersion(r)
	switch {
	case errors.Is(err, errNotRunnable):
		return fmt.Errorf("%s: %s: %w; reinstall warden-exec from the same build as warden (make build)", ExecName, p, err)
	case err != nil:
		return probeExec(p)
	case v != plan.Version:
		return fmt.Errorf("%s: %s reads plan version %d but this warden writes version %d; reinstall warden-exec from the same build as warden (make build)", ExecName, p, v, plan.Version)
	}
	return nil
}

// closeLogged closes f, logging a failure as what.
func closeLogged(f *os.File, what string) {
	if err := f.Close(); err != nil {
		slog.Warn(what, "path", f.Name(), "err", err)
	}
}

// probeExec asks the warden-exec at p for the plan version it reads
// (`--protocol-version`), bounded by probeWait: for a warden-exec
// without the version note, or that this process may not read. It runs
// by path, once per process (a close-on-exec descriptor would not do
// for a script); runs execute the trusted descriptor, and a file put at
// p since that reads another plan version refuses the first plan.
func probeExec(p string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, ProbeArg).Output()
	if err != nil {
		return fmt.Errorf("%s: asking %s for its plan version: %w; reinstall warden-exec from the same build as warden (make build)", ExecName, p, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil || v != plan.Version {
		return fmt.Errorf("%s: %s reads plan version %.20q but this warden writes version %d; reinstall warden-exec from the same build as warden (make build)", ExecName, p, out, plan.Version)
	}
	return nil
}

// Probe asks the init at p for its protocol version, as the runtime
// backends do before binding it into a box: `warden doctor` reports an
// init of another build with it.
func Probe(p string) error { return probeInit(p) }

// ChildReach is the highest descriptor number os/exec's child may write
// while it arranges files, its stdio then ExtraFiles
// (syscall.forkAndExecInChild1): it copies the exec-status pipe and each
// file that must move up to the numbers above the highest of them (or of
// their count), one each. A descriptor the child executes as
// /proc/self/fd/N must be above it.
func ChildReach(files []*os.File) int {
	hi := len(files)
	for _, f := range files {
		if f != nil {
			hi = max(hi, int(f.Fd()))
		}
	}
	return hi + len(files) + 2
}
