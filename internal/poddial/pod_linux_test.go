package poddial

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// podUID is the simulated Pod's metadata.uid.
const podUID = "5f0c1a52-7d5e-4b8e-9a51-000000000001"

// binDir holds the warden-init the tests build, removed by TestMain.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintln(os.Stderr, "removing the test's warden-init:", err)
		}
	}
	os.Exit(code)
}

// initBinary builds warden-init as make build does (static), once.
var initBinary = sync.OnceValues(func() (string, error) {
	var err error
	if binDir, err = os.MkdirTemp("", "warden-podinit-"); err != nil {
		return "", err
	}
	return testhost.BuildInit(binDir)
})

// pod is a simulated Pod: warden-init in pod mode, and its log.
type pod struct {
	addr string
	log  *testhost.SyncBuffer
}

// startPod starts warden-init in pod mode as PID 1 of its own PID
// namespace on a random loopback address, port 7070, with setpriv's
// capability arguments caps, and kills it at the test's end.
func startPod(t *testing.T, caps []string) *pod {
	t.Helper()
	testhost.RequireRoot(t)
	for _, tool := range testhost.PodContainerTools {
		testhost.RequireTool(t, tool)
	}
	bin, err := initBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{addr: fmt.Sprintf("127.%d.%d.%d:%d", rand.IntN(256), rand.IntN(256), 2+rand.IntN(250), podinit.Port), log: &testhost.SyncBuffer{}}
	args := append([]string{"-c", testhost.PodContainerScript, "pod", t.TempDir(), bin, p.addr}, caps...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), testhost.PodContainerEnv(t)...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		// its status is the log's story
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// PID 1's death ends its namespace: every process of the Pod
		_ = cmd.Process.Kill()
		<-exited
	})
	testhost.WaitFor(t, "the Pod's init to listen", func() bool {
		select {
		case <-exited:
			t.Fatalf("the Pod's init exited: %s", p.log)
		default:
		}
		return strings.Contains(p.log.String(), "listening on")
	})
	return p
}

// routerKey is the test's routerKey.
var routerKey = bytes.Repeat([]byte{0x5a}, podinit.MinRouterKey)

// key is the Pod's key under routerKey, or another router's.
func key(t *testing.T, router []byte) ed25519.PrivateKey {
	t.Helper()
	k, err := podinit.Key(router, podUID)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// podSpec is the spec of the test's sessions: Warden's defaults with a
// file-descriptor limit to see.
func podSpec() spec.Spec {
	l := spec.DefaultLimits
	l.OpenFiles = 77
	return spec.Spec{Limits: l, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
}

// attach dials the Pod and attaches a session of podSpec, closed at the
// test's end.
func attach(t *testing.T, p *pod, want podinit.Adoption) *agent.Session {
	t.Helper()
	return attachSpec(t, p, want, podSpec())
}

// attachSpec is attach with the session's spec sp.
func attachSpec(t *testing.T, p *pod, want podinit.Adoption, sp spec.Spec) *agent.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, a, err := Dial(ctx, p.addr, key(t, routerKey))
	if err != nil || a != want {
		t.Fatalf("Dial = %v, %v; want %v; the Pod's log: %s", a, err, want, p.log)
	}
	logged := &syncBuffer{}
	s, err := Attach(ctx, conn, sp, slog.New(slog.NewTextHandler(logged, nil)))
	if err != nil {
		t.Fatalf("Attach: %v; the Pod's log: %s", err, p.log)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the session: %v", err)
		}
		if got := logged.String(); got != "" {
			t.Errorf("the session logged %q; want nothing (a session's Close is no failure)", got)
		}
	})
	return s
}

// syncBuffer is a bytes.Buffer the session's goroutines may log to at
// once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// execSh runs script in s and returns its result.
func execSh(t *testing.T, s *agent.Session, script string) spec.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", script}}, agent.IO{})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return r
}

// TestPodSession runs warden-init in pod mode as a Pod's container would
// (PID 1, uid 65532, no capability) and a router's session on it: execs
// as the Pod's uid under Warden's seccomp filter, no_new_privs and
// rlimits, a persistent interpreter, and what a remote box refuses.
func TestPodSession(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	s := attach(t, p, podinit.Adopted)
	checks := []struct {
		name, script, want string
	}{
		{"the Pod's uid", "id -u; id -g", "65532\n65532\n"},
		{"no capability, no_new_privs, Warden's filter", "grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t' ' '",
			"CapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n"},
		{"the rlimits: open files, processes, CPU seconds", "ulimit -n; ulimit -p; ulimit -t", "77\n256\n120\n"},
		{"a denied call", "unshare -U true 2>&1 || echo refused", "unshare: unshare failed: Operation not permitted\nrefused\n"},
		{"the workspace", "pwd; echo kept > f; cat f", "/workspace\nkept\n"},
	}
	for _, c := range checks {
		if r := execSh(t, s, c.script); r.Stdout != c.want || r.ExitCode != 0 {
			t.Errorf("%s: %q printed %q (exit %d, stderr %q), want %q", c.name, c.script, r.Stdout, r.ExitCode, r.Stderr, c.want)
		}
	}
	if s.Workspace() != nil {
		t.Error("Workspace() is not nil, want none: a Pod's files are not on the host")
	}
	if _, err := workspace.FromFile(s.Workspace(), "/workspace of a Pod", 0, 0, workspace.Limits{}); err == nil || !strings.Contains(err.Error(), "not on this host") {
		t.Errorf("workspace.FromFile(nil) = %v, want a refusal saying the files are not on this host", err)
	}
	if err := s.Pause(context.Background()); !errors.Is(err, agent.ErrCannotPause) {
		t.Errorf("Pause = %v, want ErrCannotPause", err)
	}
	it, err := interp.New("python", s, s.Env())
	if err != nil {
		testhost.SkipOrFail(t, fmt.Sprintf("no python interpreter: %v", err))
	}
	defer it.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := it.Run(ctx, "x = 21", io.Discard, io.Discard); err != nil {
		t.Fatalf("Run(x = 21) = %v", err)
	}
	if o, err := it.Run(ctx, "x * 2", io.Discard, io.Discard); err != nil || o.Value != "42" {
		t.Errorf("x * 2 = %q, %v; want 42", o.Value, err)
	}
}

// TestPodProcessLimit: the user's processes stop at the session's
// RLIMIT_NPROC, which counts every process and thread of the Pod's uid,
// the agent's too; the agent, which does not hold the limit itself,
// still serves. The bomb reads its limit first, forks at most 64 past
// it, and each child ends by itself within 30 s, or with the exec.
func TestPodProcessLimit(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	s := attach(t, p, podinit.Adopted)
	// dash ends at a fork it cannot make, so the bomb is a shell of its
	// own that reports each fork it made.
	r := execSh(t, s, `max=$(( $(ulimit -p) + 64 ))
sh -c 'i=0; while [ $i -lt $1 ]; do sleep 30 & i=$((i+1)); echo $i; done' bomb $max >/tmp/bomb 2>/dev/null
n=0; while read -r l; do n=$l; done </tmp/bomb
echo "$n of $max"`)
	var started, tried int
	if _, err := fmt.Sscanf(r.Stdout, "%d of %d", &started, &tried); err != nil || started >= tried {
		t.Errorf("the bomb printed %q (stderr %.200q), want fewer processes started than tried", r.Stdout, r.Stderr)
	}
	t.Logf("the bomb started %d of %d processes", started, tried)
	if r := execSh(t, s, "echo alive"); r.Stdout != "alive\n" {
		t.Errorf("after the bomb: %q, %q; want the session alive", r.Stdout, r.Stderr)
	}
	// The agent (the exec's parent) does not hold the session's limit.
	r = execSh(t, s, "ulimit -p; grep '^Max processes' /proc/$PPID/limits")
	if f := strings.Fields(r.Stdout); len(f) < 4 || f[0] != "256" || f[3] == "256" {
		t.Errorf("the exec's and its agent's process limits: %q (stderr %q), want 256 for the exec only", r.Stdout, r.Stderr)
	}
}

// TestPodReturns: once a router's session ends, the Pod's init kills
// every process the session left and takes its key again, and only its
// key: a replica of the router takes over with the Pod's files but none
// of its processes, while another router key is refused.
func TestPodReturns(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	first := attach(t, p, podinit.Adopted)
	if r := execSh(t, first, "echo kept > /workspace/f"); r.ExitCode != 0 {
		t.Fatalf("writing a file: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	// A persistent bash's child is alive when the session ends: it
	// belongs to a live process, so no exec's end swept it, and it reads
	// nothing the session's end would close.
	sh, err := interp.New("bash", first, first.Env())
	if err != nil {
		t.Fatalf("starting a persistent bash: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sh.Run(ctx, "sleep 1000 </dev/null >/dev/null 2>&1 &", io.Discard, io.Discard); err != nil {
		t.Fatalf("starting sleep in the persistent bash: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// its session's end ended it; closing only lets go of its pipes
	_ = sh.Close()
	testhost.WaitFor(t, "the Pod's init to take connections again", func() bool {
		return strings.Contains(p.log.String(), "the Pod is adoptable by its key again")
	})
	if _, _, err := Dial(ctx, p.addr, key(t, bytes.Repeat([]byte{1}, podinit.MinRouterKey))); !errors.Is(err, podinit.ErrTaken) {
		t.Errorf("another router's key: Dial error = %v, want ErrTaken", err)
	}
	second := attach(t, p, podinit.Returned)
	r := execSh(t, second, "cat /workspace/f; cat /proc/[0-9]*/comm | sort")
	if !strings.HasPrefix(r.Stdout, "kept\n") || strings.Contains(r.Stdout, "sleep") || strings.Contains(r.Stdout, "bash") {
		t.Errorf("after the return the Pod shows %q, want the file kept and no process of the first session", r.Stdout)
	}
}

// TestPodRefusesPrivilege: a Pod whose securityContext leaves
// capabilities is refused by its agent, which names the fix; the session
// never starts.
func TestPodRefusesPrivilege(t *testing.T) {
	p := startPod(t, []string{"--inh-caps=-all"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := Dial(ctx, p.addr, key(t, routerKey))
	if err != nil {
		t.Fatalf("Dial: %v; the Pod's log: %s", err, p.log)
	}
	_, err = Attach(ctx, conn, podSpec(), nil)
	want := `checking the Pod's privileges: capability 0 is in the bounding set: the Pod must drop them all (securityContext.capabilities.drop: ["ALL"])`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Attach error = %v, want one saying %q", err, want)
	}
}

// TestPodModeNeedsPID1: outside a PID namespace of its own the pod mode
// refuses to start, since a session's end kills every other process of
// its namespace.
func TestPodModeNeedsPID1(t *testing.T) {
	testhost.RequireTool(t, "go")
	bin, err := initBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "pod", "--listen", "127.0.0.1:0").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "the pod mode must be its container's first process (PID 1") {
		t.Errorf("warden-init pod as pid %s: %v, %q; want exit 1 naming PID 1", "other than 1", err, out)
	}
}

func TestRefuse(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*spec.Spec)
		want string
	}{
		{"defaults", func(*spec.Spec) {}, ""},
		{"host workspace", func(s *spec.Spec) { s.Workspace = "/srv/w" }, "takes no host --workspace"},
		{"template", func(s *spec.Spec) { s.Root.Template, s.Root.Dir = "py", "/var/lib/warden/templates/py" }, `not Warden template "py"`},
		{"proxy", func(s *spec.Spec) {
			s.Network = spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.org"}}
		}, ""},
	} {
		s := podSpec()
		tc.edit(&s)
		err := Refuse(s)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Refuse = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestPodStoppedAgent: the user's processes run as the agent's uid and
// can SIGSTOP it, which no handler catches; the init kills a stopped
// agent rather than wait for it, so the session ends, killAll sweeps
// what it left, and the router can return.
func TestPodStoppedAgent(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := Dial(ctx, p.addr, key(t, routerKey))
	if err != nil {
		t.Fatalf("Dial: %v; the Pod's log: %s", err, p.log)
	}
	s, err := Attach(ctx, conn, podSpec(), nil)
	if err != nil {
		t.Fatalf("Attach: %v; the Pod's log: %s", err, p.log)
	}
	// The exec's parent is the agent (the trampoline execs in place).
	r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & kill -STOP $PPID"}}, agent.IO{})
	t.Logf("the exec that stopped its agent: %+v, %v", r, err)
	if err := s.Close(); err != nil {
		t.Logf("closing the session of the stopped agent: %v", err)
	}
	testhost.WaitFor(t, "the Pod's init to take connections again", func() bool {
		return strings.Contains(p.log.String(), "the Pod is adoptable by its key again")
	})
	if !strings.Contains(p.log.String(), "the agent was stopped") {
		t.Errorf("the Pod's log does not say the agent was stopped:\n%s", p.log)
	}
	second := attach(t, p, podinit.Returned)
	if r := execSh(t, second, "cat /proc/[0-9]*/comm | sort"); strings.Contains(r.Stdout, "sleep") {
		t.Errorf("after the stopped agent's session the Pod runs %q, want no process of that session", r.Stdout)
	}
}

// TestPodInitDropsSignals: the user's processes, which run as the init's
// uid, signal the Pod's PID 1 with every signal whose Go default ends a
// process; the init lives on, and so does the session.
func TestPodInitDropsSignals(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	s := attach(t, p, podinit.Adopted)
	sigs := "TERM HUP INT QUIT ABRT SEGV BUS USR1 USR2 PIPE ALRM"
	if r := execSh(t, s, "for s in "+sigs+"; do kill -$s 1 || exit 1; done; echo sent"); r.Stdout != "sent\n" {
		t.Fatalf("signalling the init: %q, %q (exit %d), want every signal sent", r.Stdout, r.Stderr, r.ExitCode)
	}
	if r := execSh(t, s, "kill -0 1 && echo alive"); r.Stdout != "alive\n" {
		t.Errorf("after the signals (%s): %q, %q; want the init and the session alive; the Pod's log: %s", sigs, r.Stdout, r.Stderr, p.log)
	}
}

// TestPodStartFailed: a program the trampoline cannot exec is a start
// failure, as on every backend (a *StartError with a shell's code), not
// an ordinary exit of the trampoline: the trampoline reports its exec's
// error to the agent on a close-on-exec descriptor.
func TestPodStartFailed(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	s := attach(t, p, podinit.Adopted)
	if r := execSh(t, s, "printf '#!/no/such/interp\\n' >/workspace/nointerp; printf 'echo hi\\n' >/workspace/noshebang; chmod +x /workspace/nointerp /workspace/noshebang"); r.ExitCode != 0 {
		t.Fatalf("writing the scripts: exit %d, %q", r.ExitCode, r.Stderr)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, tc := range []struct {
		name, path string
		code       int
		want       string
	}{
		{"a missing interpreter", "/workspace/nointerp", 127, `starting "/workspace/nointerp": fork/exec /workspace/nointerp: no such file or directory (a missing interpreter?)`},
		{"no shebang", "/workspace/noshebang", 126, `starting "/workspace/noshebang": fork/exec /workspace/noshebang: exec format error`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		proc, err := s.Spawn(ctx, interp.Command{Argv: []string{tc.path}, Env: s.Env(), Files: []*os.File{null, null, null}})
		cancel()
		var start *agent.StartError
		if !errors.As(err, &start) || start.Code != tc.code || start.Message != tc.want {
			if proc != nil {
				_ = proc.Kill() // the test reports the unexpected start; the session's end kills it anyway
			}
			t.Errorf("%s: Spawn = %v, %v; want a StartError, code %d, %q", tc.name, proc, err, tc.code, tc.want)
		}
	}
	if r := execSh(t, s, "echo alive"); r.Stdout != "alive\n" {
		t.Errorf("after the failed starts: %q, %q; want the session alive", r.Stdout, r.Stderr)
	}
}

// TestPodFiles: a Pod's files, not on this host, are served by its
// agent over the stream as the Pod's uid, within the limits the router
// gives, with links the box plants refused as on the host's path.
func TestPodFiles(t *testing.T) {
	p := startPod(t, testhost.DropAllCaps)
	s := attach(t, p, podinit.Adopted)
	files, err := s.RemoteFiles(workspace.Limits{MaxFileBytes: 16})
	if err != nil {
		t.Fatalf("RemoteFiles() = %v", err)
	}
	defer func() {
		if err := files.Close(); err != nil {
			t.Errorf("closing the files: %v", err)
		}
	}()
	if e, err := files.Write("d/up.txt", strings.NewReader("uploaded"), 0o600); err != nil || e.Size != 8 || e.Path != "d/up.txt" {
		t.Fatalf("Write() = %+v, %v; want 8 bytes at d/up.txt", e, err)
	}
	if r := execSh(t, s, "cat d/up.txt; stat -c ' %u %a' d/up.txt; ln -s /etc/passwd d/link"); r.Stdout != "uploaded 65532 600\n" {
		t.Errorf("the box sees the upload as %q, want it the Pod's uid's, mode 600", r.Stdout)
	}
	if uid, gid := files.Owner(); uid != 65532 || gid != 65532 {
		t.Errorf("Owner() = %d:%d, want the Pod's 65532:65532", uid, gid)
	}
	es, err := files.List("d")
	if err != nil || len(es) != 2 || es[0].Name != "link" || es[0].Type != workspace.TypeSymlink || es[1].Name != "up.txt" {
		t.Errorf("List(d) = %+v, %v; want link (a symlink) and up.txt", es, err)
	}
	rc, e, err := files.Read("d/up.txt")
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	got, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil || string(got) != "uploaded" || e.Size != 8 {
		t.Errorf("Read() = %q (size %d), %v; want \"uploaded\"", got, e.Size, err)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"a read through the planted link", readErr(files, "d/link/x"), workspace.ErrLink},
		{"a read of the planted link", readErr(files, "d/link"), workspace.ErrLink},
		{"an upload over the limit", writeErr(files, "big", strings.Repeat("x", 17)), workspace.ErrTooLarge},
		{"a stat of a missing file", statErr(files, "missing"), workspace.ErrNotFound},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := files.Remove("d", true); err != nil {
		t.Errorf("Remove(d, recursive) = %v", err)
	}
	if r := execSh(t, s, "ls -A; cat /etc/passwd > /dev/null && echo passwd kept"); r.Stdout != "passwd kept\n" {
		t.Errorf("after the removal the workspace holds %q, want nothing, and /etc/passwd kept", r.Stdout)
	}
}

func readErr(f workspace.Files, p string) error {
	rc, _, err := f.Read(p)
	if err == nil {
		err = rc.Close()
	}
	return err
}

func writeErr(f workspace.Files, p, content string) error {
	_, err := f.Write(p, strings.NewReader(content), 0)
	return err
}

func statErr(f workspace.Files, p string) error {
	_, err := f.Stat(p)
	return err
}
