package spawn

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// init pins the main goroutine to the main thread, as cmd/warden does:
// the test binary is also the spawner and the parked init these tests
// start.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if nsinit.IsInit(os.Args) {
		nsinit.Main()
	}
	if IsSpawner(os.Args) {
		Main()
	}
	os.Exit(m.Run())
}

func TestInitCommandDescriptors(t *testing.T) {
	f := func() *os.File { r, w, _ := os.Pipe(); w.Close(); t.Cleanup(func() { r.Close() }); return r }
	a, b, c, d, e, g := f(), f(), f(), f(), f(), f()
	tests := []struct {
		name      string
		req       request
		files     []*os.File
		wantExtra []bool
		wantErr   string
	}{
		{"all extras", request{Extra: []bool{true, true}}, []*os.File{a, b, c, d, e}, []bool{true, true}, ""},
		{"a gap", request{Extra: []bool{true, false, true}}, []*os.File{a, b, c, d, e}, []bool{true, false, true}, ""},
		{"cgroup last", request{Extra: []bool{true}, Cgroup: true}, []*os.File{a, b, c, d, e}, []bool{true}, ""},
		{"too few", request{Extra: []bool{true, true}}, []*os.File{a, b, c, d}, nil, "got 4 descriptors"},
		{"too many", request{Extra: []bool{true}}, []*os.File{a, b, c, d, e, g}, nil, "got 6 descriptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := initCommand(tt.req, tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("initCommand() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("initCommand() = %v", err)
			}
			var got []bool
			for _, x := range cmd.ExtraFiles {
				got = append(got, x != nil)
			}
			if !slices.Equal(got, tt.wantExtra) {
				t.Errorf("extra files present = %v, want %v", got, tt.wantExtra)
			}
			if cmd.SysProcAttr.UseCgroupFD != tt.req.Cgroup || (tt.req.Cgroup && cmd.SysProcAttr.CgroupFD != int(e.Fd())) {
				t.Errorf("cgroup fd = %v %d, want %v", cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD, tt.req.Cgroup)
			}
		})
	}
}

// TestSpawnerRestartsAfterDying asks the spawner for mapping namespaces,
// kills it, and expects the next request to be served by a new one.
func TestSpawnerRestartsAfterDying(t *testing.T) {
	testhost.RequireRoot(t)
	var c Client
	own, _ := os.Readlink("/proc/self/ns/user")
	ns, err := c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	if err != nil {
		t.Fatalf("UserNamespace() = %v", err)
	}
	got, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(ns.Fd())))
	ns.Close()
	if !strings.HasPrefix(got, "user:[") || got == own {
		t.Errorf("UserNamespace() gave %q, want a new user namespace (ours is %q)", got, own)
	}
	first := c.conn.pid
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !c.conn.isDead() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ns, err = c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	if err != nil {
		t.Fatalf("UserNamespace() after the spawner died = %v", err)
	}
	ns.Close()
	if c.conn.pid == first {
		t.Error("the dead spawner was used again")
	}
	_ = syscall.Kill(c.conn.pid, syscall.SIGKILL)
}

func TestDeadSpawnerFailsOpenRequests(t *testing.T) {
	cn := &conn{pending: map[uint64]*pending{}}
	r, w, _ := os.Pipe()
	defer w.Close()
	cn.fd = r
	p := &pending{started: make(chan result, 1), exited: make(chan struct{})}
	started := &pending{started: make(chan result, 1), exited: make(chan struct{}), answered: true}
	cn.pending[1], cn.pending[2] = p, started
	cn.die()
	if res := <-p.started; !errors.Is(res.err, ErrDied) {
		t.Errorf("an unanswered request got %v, want ErrDied", res.err)
	}
	for _, q := range []*pending{p, started} {
		select {
		case <-q.exited:
		default:
			t.Error("an init of the dead spawner is not reported exited")
		}
	}
	if _, err := cn.send(request{}, nil); !errors.Is(err, ErrDied) {
		t.Errorf("send() on a dead spawner = %v, want ErrDied", err)
	}
}

func TestReleasedProcIsNotSignalled(t *testing.T) {
	r, w, _ := os.Pipe()
	defer w.Close()
	p := &Proc{pidfd: r}
	p.Release()
	if err := p.Signal(syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal() after Release = %v, want os.ErrProcessDone (the descriptor number may be another's)", err)
	}
	p.Release()
}

// TestSpawnerSurvivesFullDescriptorTable asks for a mapping namespace
// while this process cannot take another descriptor, as a server at its
// RLIMIT_NOFILE is: the namespace sent back cannot be received. The
// request must fail with the reason, and the spawner (with every init it
// started) must live on; it used to take the lost descriptor for a broken
// connection and hang up, which killed every sandbox.
func TestSpawnerSurvivesFullDescriptorTable(t *testing.T) {
	testhost.RequireRoot(t)
	var c Client
	ns, err := c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	if err != nil {
		t.Fatalf("UserNamespace() = %v", err)
	}
	ns.Close()
	first := c.conn.pid
	t.Cleanup(func() { _ = syscall.Kill(c.conn.pid, syscall.SIGKILL) })

	release := testhost.ExhaustFDs(t, 0)
	ns, err = c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	release()
	if err == nil {
		ns.Close()
		t.Fatal("UserNamespace() with a full descriptor table succeeded; the test did not fill the table")
	}
	if !errors.Is(err, ErrNoDescriptors) {
		t.Errorf("UserNamespace() with a full descriptor table = %v, want ErrNoDescriptors", err)
	}
	if c.conn.isDead() || c.conn.pid != first {
		t.Fatalf("the spawner (pid %d) was dropped after a lost descriptor (now %d, dead %v)", first, c.conn.pid, c.conn.isDead())
	}
	ns, err = c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	if err != nil {
		t.Fatalf("UserNamespace() once descriptors were free = %v", err)
	}
	ns.Close()
	if c.conn.pid != first {
		t.Errorf("a new spawner (pid %d) replaced pid %d", c.conn.pid, first)
	}
}

// TestRecvKeepsAMessageWhoseDescriptorsWereLost: a datagram received
// while the table is full keeps its body (so the spawner can answer the
// request with the reason) and reports ErrNoDescriptors.
func TestRecvKeepsAMessageWhoseDescriptorsWereLost(t *testing.T) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(pair[0])
	defer syscall.Close(pair[1])
	if err := send(pair[0], request{ID: 7, Kind: "userns"}, os.Stdin); err != nil {
		t.Fatal(err)
	}
	// A limit of no descriptor at all, not a table filled to its
	// limit: a descriptor another test's process handle frees when the
	// GC collects it would make room in a full table.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	none := unix.Rlimit{Cur: 0, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &none); err != nil {
		t.Fatal(err)
	}
	var got request
	files, err := recv(pair[1], &got)
	if rerr := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatalf("restoring RLIMIT_NOFILE: %v", rerr)
	}
	closeAll(files)
	if !errors.Is(err, ErrNoDescriptors) || got.ID != 7 {
		t.Errorf("recv() with a full table = id %d, %v; want id 7, ErrNoDescriptors", got.ID, err)
	}
}

// TestSpawnerOutOfDescriptors holds the spawner itself at a descriptor
// limit of zero: a request it cannot serve for that must fail with
// ErrNoDescriptors (retryable, a 503), not a plain error (a 500), and the
// spawner must serve again once its limit is back.
func TestSpawnerOutOfDescriptors(t *testing.T) {
	testhost.RequireRoot(t)
	var c Client
	ns, err := c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	if err != nil {
		t.Fatalf("UserNamespace() = %v", err)
	}
	ns.Close()
	pid := c.conn.pid
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	denied := old
	denied.Cur = 0
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &denied, nil); err != nil {
		t.Fatal(err)
	}
	ns, err = c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001)
	if perr := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); perr != nil {
		t.Fatal(perr)
	}
	if err == nil {
		ns.Close()
		t.Fatal("UserNamespace() from a spawner at a limit of 0 descriptors succeeded")
	}
	if !errors.Is(err, ErrNoDescriptors) || !strings.Contains(err.Error(), "spawner is out of file descriptors") {
		t.Errorf("UserNamespace() from a spawner out of descriptors = %v, want ErrNoDescriptors saying so", err)
	}
	if ns, err = c.UserNamespace(4242, 0x7E000001, 4242, 0x7E000001); err != nil {
		t.Fatalf("UserNamespace() once the limit is back = %v", err)
	}
	ns.Close()
}

// TestFailureReply: the reply to a failed request says whether it failed
// for want of descriptors, and the client's error matches
// ErrNoDescriptors exactly then.
func TestFailureReply(t *testing.T) {
	tests := []struct {
		err     error
		noFDs   bool
		message string
	}{
		{fmt.Errorf("fork/exec: %w", unix.EMFILE), true, "the sandbox spawner is out of file descriptors (fork/exec: too many open files); retry once connections have closed"},
		{fmt.Errorf("open: %w", unix.ENFILE), true, "the sandbox spawner is out of file descriptors (open: too many open files in system); retry once connections have closed"},
		{errors.New("unknown request"), false, "unknown request"},
	}
	for _, tt := range tests {
		r := failure(7, tt.err)
		got := r.err()
		if r.ID != 7 || r.NoDescriptors != tt.noFDs || errors.Is(got, ErrNoDescriptors) != tt.noFDs || got.Error() != tt.message {
			t.Errorf("failure(%v) = %+v, err %v; want no_descriptors %v, message %q", tt.err, r, got, tt.noFDs, tt.message)
		}
	}
}

// TestSpawnerRefusesOtherVersion: the spawner is warden-init, perhaps of
// another build. A request of another protocol version, or with a field
// it does not know, starts nothing and is answered with what to do; the
// spawner serves on.
func TestSpawnerRefusesOtherVersion(t *testing.T) {
	testhost.RequireRoot(t)
	var c Client
	cn, err := c.current()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, body, want string }{
		{"newer server", `{"id":%d,"version":%d,"kind":"userns"}`, fmt.Sprintf("speaks protocol version %d but warden sent version %d", nsinit.Version, nsinit.Version+1)},
		{"server from before versioning", `{"id":%d,"kind":"userns"}`, fmt.Sprintf("speaks protocol version %d but warden is from before protocol versioning", nsinit.Version)},
		{"unknown field", `{"id":%d,"version":%d,"kind":"userns","setting":1}`, `unknown field "setting"`},
	}
	for i, tt := range tests {
		version := nsinit.Version
		if i == 0 {
			version++
		}
		cn.mu.Lock()
		cn.next++
		id := cn.next
		p := &pending{started: make(chan result, 1), exited: make(chan struct{})}
		cn.pending[id] = p
		cn.mu.Unlock()
		body := fmt.Sprintf(tt.body, id, version)
		if strings.Count(tt.body, "%d") == 1 {
			body = fmt.Sprintf(tt.body, id)
		}
		if err := unix.Sendmsg(int(cn.fd.Fd()), []byte(body), nil, nil, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-p.started:
			closeAll(res.files)
			if !strings.Contains(res.r.Error, tt.want) || !strings.Contains(res.r.Error, reinstall) || res.r.Pid != 0 {
				t.Errorf("%s: the spawner answered %+v, want an error containing %q and %q", tt.name, res.r, tt.want, reinstall)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer from the spawner in 20 s", tt.name)
		}
	}
	ns, err := c.UserNamespace(1000, 100000, 1000, 100000)
	if err != nil {
		t.Fatalf("the spawner stopped serving after the refusals: %v", err)
	}
	ns.Close()
}

// TestCommandExec: Init.Exec runs warden-exec, found by the process that
// runs Command beside its own executable (nsinit.Executor), never the Go
// init; without it the command is the Go init's. Here no warden-exec
// sits beside the test binary, so an Exec request fails with Executor's
// one line (how to fix it) and starts nothing; the positive path (a run
// with warden-exec as PID 1, started by the spawner) is covered by e2e
// (TestServerRunUsesWardenExec).
func TestCommandExec(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdio := [3]*os.File{null, null, null}
	execPath, execErr := nsinit.Executor()
	tests := []struct {
		name     string
		exec     bool
		wantPath string
		wantArg0 string
		wantErr  error
	}{
		{"go init", false, nsinit.Binary(), nsinit.Arg0, nil},
		{"warden-exec", true, execPath, nsinit.ExecName, execErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := Command(Init{Exec: tt.exec}, stdio, nil, nil)
			if tt.wantErr != nil {
				if err == nil || err.Error() != tt.wantErr.Error() {
					t.Fatalf("Command(Exec: %v) error = %v, want %v", tt.exec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Command(Exec: %v) = %v", tt.exec, err)
			}
			if cmd.Path != tt.wantPath || cmd.Args[0] != tt.wantArg0 {
				t.Errorf("Command(Exec: %v) runs %q as %q, want %q as %q", tt.exec, cmd.Path, cmd.Args[0], tt.wantPath, tt.wantArg0)
			}
		})
	}
}

// TestSpawnerFindsItsOwnExecutor: an Exec request makes the spawner look
// for warden-exec beside its own executable, as warden run does; with
// none there (the test binary's directory) the start fails with that one
// line and no init starts. The positive path is covered by e2e
// (TestServerRunUsesWardenExec), where warden-exec sits beside the server.
func TestSpawnerFindsItsOwnExecutor(t *testing.T) {
	testhost.RequireRoot(t)
	_, want := nsinit.Executor()
	if want == nil {
		t.Skip("a warden-exec sits beside the test binary")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var c Client
	defer func() {
		if c.conn != nil {
			_ = syscall.Kill(c.conn.pid, syscall.SIGKILL)
		}
	}()
	p, err := c.Start(Init{Exec: true, UID: 4242, GID: 4242, Cloneflags: unix.CLONE_NEWUSER}, [3]*os.File{null, null, null}, nil, nil)
	if err == nil {
		_ = p.Signal(syscall.SIGKILL)
		p.Exit()
		p.Release()
		t.Fatalf("Start(Exec) started pid %d, want %v", p.Pid, want)
	}
	if err.Error() != want.Error() || !errors.Is(err, nsinit.ErrNoExecutor) {
		t.Errorf("Start(Exec) error = %v, want %v matching nsinit.ErrNoExecutor", err, want)
	}
}

// TestNoExecutorReply: a start that found no warden-exec (Executor's
// error, or an exec of one removed since: StartError) reaches the
// server's client still matching nsinit.ErrNoExecutor, in the same
// words, so auto can take the Go init; other failures do not match.
func TestNoExecutorReply(t *testing.T) {
	gone := StartError(Init{Exec: true}, &fs.PathError{Op: "fork/exec", Path: "/x/warden-exec", Err: syscall.ENOENT})
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"executor's error", fmt.Errorf("finding it: %w", nsinit.ErrNoExecutor), true},
		{"removed since", gone, true},
		{"go init missing", StartError(Init{}, &fs.PathError{Op: "fork/exec", Path: "/x/warden-init", Err: syscall.ENOENT}), false},
		{"other failure", StartError(Init{Exec: true}, syscall.EPERM), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, nsinit.ErrNoExecutor); got != tt.want {
				t.Fatalf("errors.Is(%v, ErrNoExecutor) = %v, want %v", tt.err, got, tt.want)
			}
			r := failure(1, tt.err)
			raw, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var back reply
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			got := back.err()
			if errors.Is(got, nsinit.ErrNoExecutor) != tt.want || got.Error() != tt.err.Error() {
				t.Errorf("client's error %v (matches %v), want %q matching %v", got, errors.Is(got, nsinit.ErrNoExecutor), tt.err, tt.want)
			}
		})
	}
}
