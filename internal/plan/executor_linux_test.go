package plan

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// The executor's sources, from this package's directory.
const execSources = "../../cmd/warden-exec"

var (
	buildOnce sync.Once
	execPath  string
	buildErr  error
)

// executor builds warden-exec once with the address and undefined
// behaviour sanitizers, so the tests below catch a read past a buffer.
func executor(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("WARDEN_CI") != "" {
			t.Fatal("gcc is missing: make deps installs it")
		}
		t.Skip("gcc is missing: make deps installs it")
	}
	buildOnce.Do(func() {
		srcs, _ := filepath.Glob(filepath.Join(execSources, "*.c"))
		dir, err := os.MkdirTemp("", "warden-exec-test")
		if err != nil {
			buildErr = err
			return
		}
		execPath = filepath.Join(dir, "warden-exec")
		args := append([]string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
			"-fno-sanitize-recover=all", "-o", execPath}, srcs...)
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building warden-exec: %v", buildErr)
	}
	return execPath
}

// runExecutor sends frame to a new warden-exec and reads its status.
func runExecutor(t *testing.T, frame []byte, raw bool) Status {
	t.Helper()
	st, _ := runExecutorWith(t, frame, raw, execOptions{})
	return st
}

// execOptions are what some tests add to a warden-exec run: descriptors
// from 4 on, process attributes, and a step after the plan is sent.
type execOptions struct {
	extra []*os.File
	attr  *syscall.SysProcAttr
	after func(t *testing.T)
	// wrap, when set, is a command that execs warden-exec, given last.
	wrap []string
	// stderr, when set, gets warden-exec's standard error, which is then
	// the program's (a Drain test), not a fault of the executor.
	stderr *string
	// stdout and stderrFile, when set, are warden-exec's standard
	// output and error themselves.
	stdout, stderrFile *os.File
}

// runExecutorWith is runExecutor with opts, returning the program's
// standard output too.
func runExecutorWith(t *testing.T, frame []byte, raw bool, opts execOptions) (Status, string) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Non-blocking before os.NewFile, so the runtime polls it and the
	// read deadline below bounds the wait for the status.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
	defer host.Close()
	cmd := exec.Command(executor(t))
	if len(opts.wrap) > 0 {
		cmd = exec.Command(opts.wrap[0], append(opts.wrap[1:], executor(t))...)
	}
	cmd.ExtraFiles = append([]*os.File{child}, opts.extra...)
	cmd.SysProcAttr = opts.attr
	cmd.Env = []string{"ASAN_OPTIONS=detect_leaks=0"}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if opts.stdout != nil {
		cmd.Stdout = opts.stdout
	}
	if opts.stderrFile != nil {
		cmd.Stderr = opts.stderrFile
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	if raw {
		_, err = host.Write(frame)
	} else {
		err = Send(host, frame)
	}
	if err != nil {
		t.Fatal(err)
	}
	if opts.after != nil {
		opts.after(t)
	}
	if err := host.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("bounding the wait for the status: %v", err)
	}
	st, err := ReadStatus(host)
	werr := cmd.Wait()
	if err != nil {
		t.Fatalf("reading the status: %v (executor: %v, stderr %q)", err, werr, stderr.String())
	}
	if opts.stderr != nil {
		*opts.stderr = stderr.String()
	} else if stderr.Len() > 0 {
		t.Errorf("the executor wrote to stderr: %q", stderr.String())
	}
	return st, stdout.String()
}

func encode(t *testing.T, p *Plan) []byte {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func self() []uint64 { return []uint64{uint64(os.Getuid()), uint64(os.Getgid())} }

func program(argv ...string) Op {
	return Op{Code: Exec, Ints: self(), Strs: append([]string{argv[0], "/"}, argv...), Context: "starting the program"}
}

// TestExecutorStatus: warden-exec reports how the program ended, why it
// could not start, and which op failed with which errno, as the status
// encoding says.
func TestExecutorStatus(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(notExec)
	if err := os.WriteFile(filepath.Join(dir, "nointerp"), []byte("#!/no/such/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}
	inDir := Op{Code: Env, Strs: []string{"PATH=/no/such/dir:" + dir}}
	emptyPath := Op{Code: Env, Strs: []string{"PATH="}}
	cd := Op{Code: Chdir, Strs: []string{dir}}
	procAt60 := Op{Code: OpenFD, Ints: []uint64{syscall.O_RDONLY | syscall.O_DIRECTORY, 60}, Strs: []string{"/proc"}}
	tests := []struct {
		name string
		ops  []Op
		want Status
	}{
		{"exit code", []Op{path, program("sh", "-c", "exit 3")}, Status{Kind: StatusRan, Op: 1, ExitCode: 3}},
		{"signal", []Op{path, program("sh", "-c", "kill -9 $$")}, Status{Kind: StatusRan, Op: 1, ExitCode: 137, Signal: 9}},
		{"not found", []Op{path, program("no-such-command-warden")}, Status{Kind: StatusExec, Op: 0, Errno: int32(syscall.ENOENT)}},
		{"not executable", []Op{program(notExec)}, Status{Kind: StatusExec, Op: ExecLookup, Errno: int32(syscall.ENOEXEC)}},
		{"missing interpreter", []Op{program(filepath.Join(dir, "nointerp"))}, Status{Kind: StatusExec, Op: ExecExecve, Errno: int32(syscall.ENOENT)}},
		{"missing interpreter on PATH", []Op{inDir, program("nointerp")}, Status{Kind: StatusExec, Op: ExecExecve + 1, Errno: int32(syscall.ENOENT)}},
		{"empty PATH", []Op{cd, emptyPath, program("nointerp")}, Status{Kind: StatusExec, Op: ExecLookup, Errno: int32(syscall.ENOENT)}},
		{"failed op", []Op{{Code: Chdir, Strs: []string{"/no/such/dir"}}, program("/bin/true")}, Status{Kind: StatusSetup, Op: 0, Errno: int32(syscall.ENOENT)}},
		{"ok errno", []Op{{Code: Mkdir, Ints: []uint64{0o755, uint64(syscall.EEXIST)}, Strs: []string{"/"}}, program("/bin/true")}, Status{Kind: StatusRan, Op: 1}},
		{"no program", []Op{{Code: Chdir, Strs: []string{"/"}}}, Status{Kind: StatusRefused, Op: 1}},
		{"sysinfo without its /proc", []Op{{Code: Sysinfo, Ints: []uint64{0, ^uint64(0), 999, 0, 0}}, program("/bin/true")}, Status{Kind: StatusSetup, Op: 0, Errno: int32(syscall.EBADF)}},
		{"sysinfo without a filter", []Op{procAt60, {Code: Sysinfo, Ints: []uint64{0, ^uint64(0), 60, 0, 0}}, program("/bin/true")}, Status{Kind: StatusLockdown, Op: LockNoFilter, Errno: int32(syscall.EINVAL)}},
		{"sysinfo without the file identity", []Op{procAt60, {Code: Sysinfo, Ints: []uint64{0, ^uint64(0), 60, 4242, 4242}}, program("/bin/true")}, Status{Kind: StatusSetup, Op: 1, Errno: int32(syscall.EINVAL)}},
		{"sysinfo's identity not the program's", []Op{procAt60, {Code: FileIdentity, Ints: []uint64{4242, 4242}}, {Code: Sysinfo, Ints: []uint64{0, ^uint64(0), 60, 4242, 4242}}, program("/bin/true")}, Status{Kind: StatusSetup, Op: 2, Errno: int32(syscall.EINVAL)}},
		{"a filter the kernel refuses", []Op{{Code: Seccomp, Ints: []uint64{0xffff}}, program("/bin/true")}, Status{Kind: StatusLockdown, Op: LockFilter, Errno: int32(syscall.EINVAL)}},
		{"program not last", []Op{program("/bin/true"), {Code: Chdir, Strs: []string{"/"}}}, Status{Kind: StatusRefused, Op: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runExecutor(t, encode(t, &Plan{Ops: tc.ops}), false)
			if got != tc.want {
				t.Errorf("status %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestExecutorRefuses: a frame that is no plan of this version is
// refused whole, with the op it stopped at, and nothing is applied.
func TestExecutorRefuses(t *testing.T) {
	good := encode(t, &Plan{Ops: []Op{program("/bin/true")}})
	le := func(v uint32) string { return string([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}) }
	frame := func(b string) []byte { return append([]byte(le(uint32(len(b)))), b...) }
	tests := []struct {
		name  string
		frame []byte
		op    int32
	}{
		{"garbage", frame("hello, world"), -1},
		{"version", frame("WPLN" + le(Version+1) + string(good[8:])), -1},
		{"over the bound", []byte(le(MaxBytes + 1)), -1},
		{"unknown code", frame("WPLN" + le(Version) + le(1) + le(99) + le(0) + le(0)), 0},
		{"bad counts", frame("WPLN" + le(Version) + le(1) + le(uint32(Chdir)) + le(0) + le(0)), 0},
		{"string past the end", frame("WPLN" + le(Version) + le(1) + le(uint32(Chdir)) + le(0) + le(1) + le(1000) + "/"), 0},
		{"NUL in a string", frame("WPLN" + le(Version) + le(1) + le(uint32(Chdir)) + le(0) + le(1) + le(3) + "a\x00b"), 0},
		{"trailing bytes", frame(string(good) + "x"), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runExecutor(t, tc.frame, true)
			if want := (Status{Kind: StatusRefused, Op: tc.op}); got != want {
				t.Errorf("status %+v, want %+v", got, want)
			}
		})
	}
}

// TestExecutorAppliesAsGo: the file ops leave the same tree whether Go
// (Apply) or warden-exec applies them.
func TestExecutorAppliesAsGo(t *testing.T) {
	tree := func(dir string) []Op {
		return []Op{
			{Code: Mkdir, Ints: []uint64{0o755, 0}, Strs: []string{dir + "/d"}},
			{Code: Chmod, Ints: []uint64{0o1777}, Strs: []string{dir + "/d"}},
			{Code: WriteFile, Ints: []uint64{0o444}, Strs: []string{dir + "/d/f", "content\n"}},
			{Code: Touch, Ints: []uint64{0o644}, Strs: []string{dir + "/t"}},
			{Code: Symlink, Strs: []string{"../tmp", dir + "/l"}},
			{Code: WriteFile, Ints: []uint64{0o644}, Strs: []string{dir + "/gone", ""}},
			{Code: Unlink, Strs: []string{dir + "/gone"}},
			{Code: CheckDir, Strs: []string{dir + "/d"}},
			{Code: CheckChrdev, Ints: []uint64{1, 3}, Strs: []string{"/dev/null"}},
		}
	}
	goDir, cDir := t.TempDir(), t.TempDir()
	if err := Apply(tree(goDir)); err != nil {
		t.Fatal(err)
	}
	st := runExecutor(t, encode(t, &Plan{Ops: append(tree(cDir), program("/bin/true"))}), false)
	if st.Kind != StatusRan || st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	if g, c := describe(t, goDir), describe(t, cDir); g != c {
		t.Errorf("Go made\n%s\nwarden-exec made\n%s", g, c)
	}
}

// describe lists dir's tree: names, types, modes, link targets, contents.
func describe(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel + " " + fi.Mode().String())
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			b.WriteString(" -> " + target)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + strconv.Quote(string(data)))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestExecutorTable: the C table lists the codes of ops.go with the same
// counts.
func TestExecutorTable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(execSources, "plan.c"))
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := os.ReadFile(filepath.Join(execSources, "plan.h"))
	if err != nil {
		t.Fatal(err)
	}
	// The enum in plan.h numbers from OP_MOUNT = 1, in ops.go's order.
	enum := regexp.MustCompile(`(?s)enum op_code \{(.*?)\};`).FindSubmatch(hdr)
	if enum == nil {
		t.Fatal("no enum op_code in plan.h")
	}
	names := regexp.MustCompile(`OP_([A-Z_]+)`).FindAllSubmatch(enum[1], -1)
	for i, n := range names {
		name := string(n[1])
		if name == "END" {
			if Code(i+1) != codeEnd {
				t.Errorf("plan.h ends its codes at %d, ops.go at %d", i+1, codeEnd)
			}
			continue
		}
		if got := Code(i + 1).String(); got != name {
			t.Errorf("code %d is %s in plan.h, %s in ops.go", i+1, name, got)
		}
	}
	rows := regexp.MustCompile(`\[OP_([A-Z_]+)\] = \{1, (\d+), (PLAN_MAX_INTS|\d+), (\d+), (PLAN_MAX_STRS|\d+)\}`).FindAllSubmatch(src, -1)
	inC := map[string]string{}
	for _, r := range rows {
		inC[string(r[1])] = strings.Join([]string{string(r[2]), string(r[3]), string(r[4]), string(r[5])}, " ")
	}
	// num spells v as plan.c does: a bound by its name.
	num := func(v, bound uint32, name string) string {
		if v == bound {
			return name
		}
		return strconv.FormatUint(uint64(v), 10)
	}
	for _, c := range table {
		got := inC[c.name]
		want := strings.Join([]string{strconv.Itoa(int(c.minInts)), num(c.maxInts, MaxInts, "PLAN_MAX_INTS"),
			strconv.Itoa(int(c.minStrs)), num(c.maxStrs, MaxStrs, "PLAN_MAX_STRS")}, " ")
		if got != want {
			t.Errorf("%s: counts %q in plan.c, %q in ops.go", c.name, got, want)
		}
	}
}

// TestExecutorSignalDefaults: signals ignored where warden-exec was
// started (SIGHUP under nohup, SIGCHLD) reach the program at their
// defaults, and an ignored SIGCHLD does not lose the program's status.
// perl starts warden-exec with both ignored (a Go test cannot ignore
// them for a child alone, and sh will not ignore SIGCHLD).
func TestExecutorSignalDefaults(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if err != nil {
		testhost.SkipOrFail(t, "perl starts warden-exec with signals ignored: "+err.Error())
	}
	wrap := []string{perl, "-e", `$SIG{HUP} = $SIG{CHLD} = "IGNORE"; exec @ARGV or die "exec: $!"`}
	path := Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}
	p := &Plan{Ops: []Op{path, program("sh", "-c", "grep SigIgn /proc/self/status; exit 3")}}
	st, out := runExecutorWith(t, encode(t, p), false, execOptions{wrap: wrap})
	if want := (Status{Kind: StatusRan, Op: 1, ExitCode: 3}); st != want {
		t.Errorf("status with SIGCHLD ignored %+v, want %+v", st, want)
	}
	var mask uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "SigIgn:\t%x", &mask); err != nil {
		t.Fatalf("reading the program's SigIgn from %q: %v", out, err)
	}
	if ignored := mask & (1<<(syscall.SIGHUP-1) | 1<<(syscall.SIGCHLD-1)); ignored != 0 {
		t.Errorf("program's SigIgn %016x ignores %016x, want SIGHUP and SIGCHLD at their defaults", mask, ignored)
	}
}

// TestExecutorSignalDefaultsReserved: signals 32 and 33, which the C
// library reserves and its signal(2) refuses to change, reach the program
// at their defaults too when warden-exec was started with them ignored
// (a CI run once handed them so).
func TestExecutorSignalDefaultsReserved(t *testing.T) {
	executor(t) // skips or fails without gcc, as every executor test
	wrapper := filepath.Join(t.TempDir(), "ignore-reserved")
	if out, err := exec.Command("gcc", "-O2", "-o", wrapper, "testdata/ignore_reserved.c").CombinedOutput(); err != nil {
		t.Fatalf("building the wrapper: %v: %s", err, out)
	}
	path := Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}
	p := &Plan{Ops: []Op{path, program("sh", "-c", "grep SigIgn /proc/self/status; exit 3")}}
	st, out := runExecutorWith(t, encode(t, p), false, execOptions{wrap: []string{wrapper}})
	if want := (Status{Kind: StatusRan, Op: 1, ExitCode: 3}); st != want {
		t.Errorf("status with signals 32 and 33 ignored %+v, want %+v", st, want)
	}
	var mask uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "SigIgn:\t%x", &mask); err != nil {
		t.Fatalf("reading the program's SigIgn from %q: %v", out, err)
	}
	if mask != 0 {
		t.Errorf("program's SigIgn %016x, want every signal at its default", mask)
	}
}

// TestApplyRefusesOwnOps: the Go applier leaves the program's own ops
// (its output, its sysinfo answers, its filter, its exec and environment)
// to the caller that starts the program, and says so.
func TestApplyRefusesOwnOps(t *testing.T) {
	ops := []Op{
		{Code: Drain, Ints: []uint64{1, 1}},
		{Code: Sysinfo, Ints: []uint64{0, ^uint64(0), 0, 0, 0}},
		{Code: Seccomp, Ints: []uint64{6 | 0x7fff0000<<32}},
		program("/bin/true"),
		{Code: Env},
	}
	for _, op := range ops {
		if err := ApplyOne(op); !errors.Is(err, errOwnOp) {
			t.Errorf("ApplyOne(%s) = %v, want errOwnOp", op.Code, err)
		}
	}
}

// TestExecutorLockdown: a lockdown step that fails is reported as that
// step, worded as the Go init words it: warden-exec started by a user
// without CAP_SETPCAP cannot empty its bounding set, and says which
// capability it could not drop.
func TestExecutorLockdown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start warden-exec as another user")
	}
	// the build's directory is private: let the other user in
	if err := os.Chmod(filepath.Dir(executor(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	p := &Plan{Ops: []Op{program("/bin/true")}}
	st, _ := runExecutorWith(t, encode(t, p), false, execOptions{attr: attr})
	if want := (Status{Kind: StatusLockdown, Op: LockBounding, Errno: int32(syscall.EPERM)}); st != want {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	if got, want := p.Err(st).Error(), "dropping bounding capability 0: operation not permitted"; got != want {
		t.Errorf("Err = %q, want %q", got, want)
	}
}
