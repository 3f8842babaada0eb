package native

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/fontcache"
	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// fontStore is where matplotlib's font lists are kept, once UseFontCache
// has named it; nil: no sandbox gets one and none is built.
var fontStore atomic.Pointer[fontcache.Store]

// UseFontCache makes native sandboxes on the host's root start with
// matplotlib's font list in their fresh HOME, built once for the root and
// kept in s (see internal/fontcache). When the root's list is missing, a
// run does not wait for it: it starts a detached warden (FontBuilderArg0)
// that builds it in a sandbox of its own, under the store's lock, and
// runs on without one. It takes root and a kernel that idmaps tmpfs (the
// build's HOME is a host tmpfs, as a persistent workspace is); without
// them it does nothing.
func UseFontCache(s fontcache.Store) {
	if os.Geteuid() == 0 && IdmapsTmpfs() {
		fontStore.Store(&s)
	}
}

// homeFiles is what the box's fresh HOME starts with: the host root's
// font list, when it is built. A template's root, and a host scratch
// (whose HOME outlives the sandbox), get none.
func (b *box) homeFiles() []rootfs.HomeFile {
	s := fontStore.Load()
	if s == nil || b.child.root != nil || b.spec.Scratch != "" {
		return nil
	}
	key, err := fontcache.RootKey("/")
	if err != nil || key.None {
		if err != nil {
			b.log().Warn("keying matplotlib's font list: the sandbox builds its own", "err", err)
		}
		return nil
	}
	f, found, err := s.Load(key)
	switch {
	case err != nil:
		b.log().Warn("reading matplotlib's font list: the sandbox builds its own", "err", err)
		return nil
	case !found:
		if !s.Attempted(key) {
			startFontBuild(*s, b.log())
		}
		return nil
	case f.None():
		return nil
	}
	return []rootfs.HomeFile{{Path: fontcache.Dir + "/" + f.Name, Data: f.Data}}
}

// FontBuilderArg0 is the argv[0] that makes the warden binary build the
// host root's font list (FontBuilderMain): main checks it first, as it
// does the init's.
const FontBuilderArg0 = "warden-font-cache"

// IsFontBuilder says argv is the font list builder's.
func IsFontBuilder(argv []string) bool { return len(argv) == 1 && argv[0] == FontBuilderArg0 }

// fontLockFD is where the builder inherits the store's lock, held.
const fontLockFD = 3

// startFontBuild starts the builder unless one holds the store's lock:
// concurrent first runs start one build between them. The builder
// inherits the lock and holds it until it has saved the list.
// The builder outlives warden run, so it takes nothing of its caller's
// but the lock (builderCmd). Holding the lock, in the host's mount
// namespace, it first removes what builders killed midway left.
func startFontBuild(s fontcache.Store, log *slog.Logger) {
	lock, held, err := s.TryLock()
	if err != nil || !held {
		if err != nil {
			log.Warn("locking the font cache to build matplotlib's font list", "err", err)
		}
		return
	}
	defer lock.Close() // the builder holds its own copy
	if err := sweepBuilds(s.Dir); err != nil {
		log.Warn("removing what killed builds of matplotlib's font list left", "err", err)
	}
	cmd := builderCmd(s, lock)
	if err := cmd.Start(); err != nil {
		log.Warn("starting the build of matplotlib's font list", "err", err)
		return
	}
	// A long-lived process reaps it; warden run exits first, and init does.
	go func() { _ = cmd.Wait() }()
}

// builderCmd is the detached builder holding lock: its own session, its
// own mount namespace (the scratch it mounts goes with it, however it
// ends), "/" for its directory and /dev/null for its stdio, so that it
// keeps no directory, terminal or pipe of its caller's busy. A
// descriptor its caller left open across exec it closes itself, first
// (closeStrayFDs): exec passes those on whatever the Cmd says.
func builderCmd(s fontcache.Store, lock *os.File) *exec.Cmd {
	return &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{FontBuilderArg0}, Env: []string{"WARDEN_FONT_STORE=" + s.Dir},
		Dir: "/", ExtraFiles: []*os.File{lock},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Unshareflags: syscall.CLONE_NEWNS},
	}
}

// maxFDs bounds the descriptors closeStrayFDs looks at.
const maxFDs = 4096

// closeStrayFDs closes every descriptor above the lock's that is not
// close-on-exec: ones the builder's caller's caller left open (a shell's
// `9>lock`), which the builder would otherwise hold for its whole build.
// Go opens its own close-on-exec, so none of them is closed.
func closeStrayFDs() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing descriptors: %w", err)
	}
	names, err := d.Readdirnames(maxFDs)
	d.Close()
	if err != nil {
		return fmt.Errorf("listing descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= fontLockFD {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
	return nil
}

// fontBuildTimeout bounds a build: matplotlib lists a few hundred fonts
// in well under a second of CPU.
const fontBuildTimeout = 2 * time.Minute

// FontBuilderMain builds the host root's font list into the store named
// by the environment and exits: 0 when it is saved (or was already), 1
// with one line on stderr when not (the next run tries again).
func FontBuilderMain() {
	err := closeStrayFDs()
	if err == nil {
		s := fontcache.Store{Dir: os.Getenv("WARDEN_FONT_STORE")}
		ctx, cancel := context.WithTimeout(context.Background(), fontBuildTimeout)
		err = buildFonts(ctx, s)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden: building matplotlib's font list: "+err.Error())
		os.Exit(1)
	}
	os.Exit(0)
}

// buildFonts builds and saves the list of the root as it is now, if the
// store has none and no build of it started within fontcache.RetryAfter,
// holding the lock it inherited.
func buildFonts(ctx context.Context, s fontcache.Store) error {
	if s.Dir == "" {
		return errors.New("no font cache named")
	}
	if err := holdStoreLock(s); err != nil {
		return err
	}
	key, err := fontcache.RootKey("/")
	if err != nil || key.None {
		return err
	}
	if _, found, err := s.Load(key); found || err != nil || s.Attempted(key) {
		return err
	}
	if err := s.MarkAttempt(key); err != nil {
		return err
	}
	f, err := fontList(ctx, s.Dir)
	if err != nil {
		return err
	}
	return s.Save(key, f)
}

// holdStoreLock checks that the descriptor the builder inherited as its
// lock is the store's .lock file, held, and keeps it from the build's
// sandbox.
func holdStoreLock(s fontcache.Store) error {
	if err := unix.Flock(fontLockFD, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("the font cache's lock was not handed over: %w", err)
	}
	unix.CloseOnExec(fontLockFD)
	var held, want unix.Stat_t
	p := filepath.Join(s.Dir, ".lock")
	if err := unix.Fstat(fontLockFD, &held); err != nil {
		return fmt.Errorf("the font cache's lock: %w", err)
	}
	if err := unix.Lstat(p, &want); err != nil {
		return fmt.Errorf("the font cache's lock: %w", err)
	}
	if held.Dev != want.Dev || held.Ino != want.Ino {
		return fmt.Errorf("descriptor %d is not the font cache's lock %q", fontLockFD, p)
	}
	return nil
}

// sweepBuilds removes the build directories (build-*) in dir that
// builders killed midway left, unmounting their scratch first (a builder
// from before each had its own mount namespace left it mounted on the
// host); it names what it cannot remove. Only a holder of the store's
// lock calls it, in the host's mount namespace: no build is under way.
func sweepBuilds(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "build-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range names {
		scratch := filepath.Join(b, "scratch")
		if err := rootfs.UnmountScratch(scratch); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing a killed build's scratch: %w", err))
			continue
		}
		if err := os.Remove(b); err != nil {
			errs = append(errs, fmt.Errorf("removing a killed build's directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// fontList runs `import matplotlib.font_manager` in a sandbox of the
// host's root whose whole writable space is a host tmpfs, and reads the
// list matplotlib left in its HOME as hostile input. Only a clean build
// (exit 0) that left no list is the "no list" answer, saved so that the
// root costs no build on each run; a build that failed (timed out, ran
// out of memory, was killed) or left a list ReadResult refuses is an
// error, saved as nothing: the next run tries again after
// fontcache.RetryAfter.
func fontList(ctx context.Context, dir string) (fontcache.File, error) {
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fontcache.File{}, err
	}
	defer os.Remove(tmp)
	scratch := filepath.Join(tmp, "scratch")
	l := spec.DefaultLimits
	l.DiskBytes, l.Timeout = 64<<20, fontBuildTimeout
	if err := rootfs.MountScratch(scratch, l.DiskBytes, l.Inodes(), hostid.WorkspaceOwner, hostid.WorkspaceOwner); err != nil {
		return fontcache.File{}, err
	}
	defer func() {
		if err := rootfs.UnmountScratch(scratch); err != nil {
			fmt.Fprintln(os.Stderr, "warden: "+err.Error())
		}
	}()
	s := spec.Spec{Command: []string{"python3", "-c", "import matplotlib.font_manager"}, Scratch: scratch,
		Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	r, err := Runtime{}.Run(ctx, s, IO{})
	if err != nil {
		return fontcache.File{}, err
	}
	return buildResult(r, filepath.Join(scratch, "home"))
}

// buildResult is the list a build that ended with r left in home: the
// "no list" answer only for a clean exit that left none, an error for a
// build that failed or left a list ReadResult refuses.
func buildResult(r spec.Result, home string) (fontcache.File, error) {
	if r.ExitCode != 0 || r.Signal != "" || r.TimedOut || r.OOMKilled {
		return fontcache.File{}, fmt.Errorf("the build exited %d (signal %q, timed out %t, out of memory %t): %.200s",
			r.ExitCode, r.Signal, r.TimedOut, r.OOMKilled, r.Error)
	}
	f, err := fontcache.ReadResult(home)
	if err != nil {
		return fontcache.File{}, fmt.Errorf("the build's result is refused: %w", err)
	}
	return f, nil
}
