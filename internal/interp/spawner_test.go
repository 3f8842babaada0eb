package interp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// testEnv is the sandbox's environment as the tests give it: the host's
// /usr/bin python3 (which has matplotlib) comes before any pyenv shim.
var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}

// hostSpawner runs commands as plain host processes, each in its own
// process group so Kill reaches everything they started.
type hostSpawner struct {
	dir  string              // the working directory when Command.Dir is empty
	cred *syscall.Credential // the user to run as; nil for the test's own
}

func (s hostSpawner) Spawn(_ context.Context, c Command) (Process, error) {
	path, err := lookPath(c.Argv[0], c.Env)
	if err != nil {
		return nil, err
	}
	if len(c.Files) < 3 {
		return nil, fmt.Errorf("need at least 3 files, got %d", len(c.Files))
	}
	cmd := exec.Command(path, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = s.dir
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Files[0], c.Files[1], c.Files[2]
	cmd.ExtraFiles = c.Files[3:]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	hp := &hostProcess{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			hp.st = ExitStatus{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
		} else {
			hp.st = ExitStatus{Code: ws.ExitStatus()}
		}
		close(hp.done)
	}()
	return hp, nil
}

// lookPath finds name on the PATH in env, as the sandbox would.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

type hostProcess struct {
	pid  int
	st   ExitStatus
	done chan struct{}
}

func (p *hostProcess) Wait() (ExitStatus, error) {
	<-p.done
	return p.st, nil
}

func (p *hostProcess) Kill() error {
	err := syscall.Kill(-p.pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// newTest returns an Interpreter for lang on the host spawner, closed when
// the test ends. A language the host lacks skips the test (fails in CI).
func newTest(t *testing.T, lang string, opts ...Option) Interpreter {
	t.Helper()
	return newTestOn(t, hostSpawner{dir: t.TempDir()}, lang, opts...)
}

// newTestOn is newTest with the given spawner.
func newTestOn(t *testing.T, sp Spawner, lang string, opts ...Option) Interpreter {
	t.Helper()
	it, err := New(lang, sp, testEnv, opts...)
	if errors.Is(err, errors.ErrUnsupported) {
		testhost.SkipOrFail(t, err.Error())
	}
	if err != nil {
		t.Fatalf("New(%q): %v", lang, err)
	}
	t.Cleanup(func() { it.Close() })
	return it
}

// result is one Run with its captured output.
type result struct {
	Outcome
	stdout, stderr string
}

// mustRun runs code with a bounded context and fails the test on an error.
func mustRun(t *testing.T, it Interpreter, code string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
	defer cancel()
	return mustRunCtx(t, ctx, it, code)
}

func mustRunCtx(t *testing.T, ctx context.Context, it Interpreter, code string) result {
	t.Helper()
	var out, errb syncBuffer
	o, err := it.Run(ctx, code, &out, &errb)
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	if o.TimedOut && ctx.Err() == nil {
		t.Fatalf("Run(%q) timed out with a live context", code)
	}
	return result{Outcome: o, stdout: out.String(), stderr: errb.String()}
}

// deadlineSpawner records the deadline of the context a spawn gets and
// fails it.
type deadlineSpawner struct{ deadline chan time.Time }

func (s deadlineSpawner) Spawn(ctx context.Context, _ Command) (Process, error) {
	d, _ := ctx.Deadline()
	s.deadline <- d
	return nil, errors.New("no sandbox in this test")
}

// TestSpawnBounded: an interpreter's spawn outlives its Run's
// cancellation but not spawnLimit, so a sandbox that never reports the
// interpreter started cannot hold the Run for ever.
func TestSpawnBounded(t *testing.T) {
	sp := deadlineSpawner{deadline: make(chan time.Time, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := start(ctx, bashLanguage, sp, testEnv, config{}); err == nil {
		t.Fatal("start() = nil error, want the spawner's")
	}
	d := <-sp.deadline
	if d.IsZero() || time.Until(d) > spawnLimit {
		t.Errorf("spawn context deadline = %v, want one within %s", d, spawnLimit)
	}
}
