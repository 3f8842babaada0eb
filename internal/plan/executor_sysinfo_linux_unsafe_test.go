package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/seccomp"
)

// sysinfoEnv makes the test binary the sysinfo probe (sysinfoProbe).
const sysinfoEnv = "WARDEN_PLAN_SYSINFO"

// sysinfoProbe calls sysinfo(2) as a program would, then with pointers
// it must refuse: a read-only page, a struct that runs from a writable
// page into a read-only one, NULL. It reports each result, and whether a
// refused call left the memory untouched.
func sysinfoProbe() string {
	var b strings.Builder
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		fmt.Fprintf(&b, "sysinfo: %v\n", err)
	} else {
		fmt.Fprintf(&b, "uptime %d total %d free %d procs %d unit %d\n", si.Uptime, si.Totalram, si.Freeram, si.Procs, si.Unit)
	}
	page := os.Getpagesize()
	two, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return b.String() + fmt.Sprintf("mmap: %v\n", err)
	}
	if err := unix.Mprotect(two[page:], unix.PROT_READ); err != nil {
		return b.String() + fmt.Sprintf("mprotect: %v\n", err)
	}
	call := func(p uintptr) int {
		_, _, e := unix.Syscall(unix.SYS_SYSINFO, p, 0, 0)
		return int(e)
	}
	untouched := func(m []byte) bool {
		for _, c := range m {
			if c != 0 {
				return false
			}
		}
		return true
	}
	fmt.Fprintf(&b, "read-only: errno %d untouched %v\n", call(uintptr(unsafe.Pointer(&two[page]))), untouched(two))
	fmt.Fprintf(&b, "straddling: errno %d untouched %v\n", call(uintptr(unsafe.Pointer(&two[page-16]))), untouched(two))
	fmt.Fprintf(&b, "null: errno %d\n", call(0))
	fmt.Fprintf(&b, "listeners held: %d\n", listeners())
	return b.String()
}

// mapsMappings is how many one-page mappings mapsProbe makes, writable
// and read-only in turn: its maps file then runs well past 8 KiB, so
// PID 1's check reads it in more than one step.
const mapsMappings = 3000

// mapsProbe calls sysinfo(2) with a long maps file: on its stack, into
// the highest writable and read-only of its mappings, and straddling from
// a writable page into a read-only one.
func mapsProbe() string {
	var b strings.Builder
	call := func(p uintptr) int {
		_, _, e := unix.Syscall(unix.SYS_SYSINFO, p, 0, 0)
		return int(e)
	}
	page := uintptr(os.Getpagesize())
	readOnly := map[uintptr]bool{}
	var writable [][]byte
	var hiW, hiR uintptr
	for i := range mapsMappings {
		prot := unix.PROT_READ
		if i%2 == 0 {
			prot |= unix.PROT_WRITE
		}
		m, err := unix.Mmap(-1, 0, int(page), prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Sprintf("mmap: %v\n", err)
		}
		a := uintptr(unsafe.Pointer(&m[0]))
		if prot&unix.PROT_WRITE != 0 {
			writable = append(writable, m)
			hiW = max(hiW, a)
		} else {
			readOnly[a] = true
			hiR = max(hiR, a)
		}
	}
	maps, _ := os.ReadFile("/proc/self/maps")
	fmt.Fprintf(&b, "maps over 8 KiB: %v\n", len(maps) > 8<<10)
	var si unix.Sysinfo_t
	fmt.Fprintf(&b, "stack: errno %d unit %d\n", call(uintptr(unsafe.Pointer(&si))), si.Unit)
	fmt.Fprintf(&b, "highest writable: errno %d\n", call(hiW))
	fmt.Fprintf(&b, "highest read-only: errno %d\n", call(hiR))
	var edge []byte // the highest writable page right below a read-only one
	for _, w := range writable {
		a := uintptr(unsafe.Pointer(&w[0]))
		if readOnly[a+page] && (edge == nil || a > uintptr(unsafe.Pointer(&edge[0]))) {
			edge = w
		}
	}
	if edge == nil {
		return b.String() + "no writable page below a read-only one\n"
	}
	tail := edge[page-16:]
	clear(tail)
	e := call(uintptr(unsafe.Pointer(&tail[0])))
	fmt.Fprintf(&b, "straddling: errno %d untouched %v\n", e, string(tail) == string(make([]byte, 16)))
	return b.String()
}

// listeners counts the probe's descriptors that are seccomp listeners:
// PID 1 alone may hold one.
func listeners() int {
	n := 0
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.Contains(l, "seccomp") {
			n++
		}
	}
	return n
}

// The sysinfo flood: floodThreads threads make floodCalls calls each,
// past a second of PID 1's pace, while the probe writes floodBytes to
// stdout.
const floodThreads, floodCalls, floodBytes = 4, 1500, 4 << 20

// floodPaced is the least time the flood's calls can take at PID 1's
// pace of 2000 a second: 6000 calls span three windows of it, the last
// starting 2 s after the first, which may have started up to 1 s before
// the probe did. Load only lengthens it.
const floodPaced = time.Second

// sysinfoFlood floods PID 1 with sysinfo(2) calls while it writes a
// flood of output, and reports on stderr, once the calls are done (not
// waiting for the output, which a host may read only after the report),
// how many failed and whether they took floodPaced at least.
func sysinfoFlood() string {
	failed := make(chan int, floodThreads)
	start := time.Now()
	for range floodThreads {
		go func() {
			n := 0
			var si unix.Sysinfo_t
			for range floodCalls {
				if unix.Sysinfo(&si) != nil || si.Unit != 1 {
					n++
				}
			}
			failed <- n
		}()
	}
	wrote := make(chan error, 1)
	go func() {
		zeros := make([]byte, 64<<10)
		for written := 0; written < floodBytes; written += len(zeros) {
			if _, err := os.Stdout.Write(zeros); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	n := 0
	for range floodThreads {
		n += <-failed
	}
	fmt.Fprintf(os.Stderr, "calls %d failed %d paced %v\n", floodThreads*floodCalls, n, time.Since(start) >= floodPaced)
	if err := <-wrote; err != nil {
		return fmt.Sprintf("writing: %v\n", err)
	}
	return ""
}

// notifySysinfo is a filter that sends sysinfo(2) to the listener and
// allows every other call, in the Seccomp op's encoding.
func notifySysinfo() Op {
	ins := []struct {
		code   uint16
		jt, jf uint8
		k      uint32
		note   string
	}{
		{0x20, 0, 0, 0, "A = nr"},
		{0x15, 0, 1, unix.SYS_SYSINFO, "if nr == sysinfo goto 2 else 3"},
		{0x06, 0, 0, unix.SECCOMP_RET_USER_NOTIF, "return USER_NOTIF"},
		{0x06, 0, 0, unix.SECCOMP_RET_ALLOW, "return ALLOW"},
	}
	op := Op{Code: Seccomp}
	for _, in := range ins {
		op.Ints = append(op.Ints, uint64(in.code)|uint64(in.jt)<<16|uint64(in.jf)<<24|uint64(in.k)<<32)
	}
	return op
}

// sysinfoCase is one row of testdata/sysinfo_figures.json, the figures
// internal/nsinit's answerer computes too (its TestSysinfoFiguresShared):
// the box's memory usage file (none when Usage is nil) and total, and
// the free memory sysinfo must say; Host: the total is the host's.
type sysinfoCase struct {
	Name        string
	Usage       *string
	Total, Free uint64
	Host        bool
}

func sysinfoCases(t *testing.T) []sysinfoCase {
	b, err := os.ReadFile("testdata/sysinfo_figures.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []sysinfoCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("reading testdata/sysinfo_figures.json: %v", err)
	}
	return cases
}

// The descriptors the sysinfo tests open the box's /proc and usage
// file at, above those the sanitizers' runtime holds.
const procFD, usageAt = 60, 61

// The sandbox user of the sysinfo tests: no account, only ids.
const boxUID, boxGID = 4242, 4242

// sysinfoProgram copies the test binary where the sandbox user may run
// it, and returns its path.
func sysinfoProgram(t *testing.T) string {
	dir := reachableDir(t, "warden-sysinfo")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "probe")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// sysinfoOps are the ops that run the probe (in mode, the value of
// sysinfoEnv) as the sandbox user with the filter notifySysinfo, PID 1
// counting the /proc of the probe's PID namespace, and with a Sysinfo op
// unless answer is false.
func sysinfoOps(t *testing.T, bin string, c sysinfoCase, answer bool, mode string) []Op {
	t.Helper()
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	if err := os.Mkdir(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	usageFD := ^uint64(0)
	ops := []Op{
		{Code: Mount, Ints: []uint64{unix.MS_REC | unix.MS_PRIVATE, 0}, Strs: []string{"none", "/", "", ""}},
		{Code: Mount, Ints: []uint64{unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, 0}, Strs: []string{"proc", proc, "proc", ""}},
		{Code: OpenFD, Ints: []uint64{unix.O_RDONLY | unix.O_DIRECTORY, procFD}, Strs: []string{proc}},
	}
	if c.Usage != nil {
		usage := filepath.Join(dir, "memory.usage_in_bytes")
		if err := os.WriteFile(usage, []byte(*c.Usage), 0o644); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, Op{Code: OpenFD, Ints: []uint64{unix.O_RDONLY, usageAt}, Strs: []string{usage}})
		usageFD = usageAt
	}
	if answer {
		// the answers' file identity, taken before SYSINFO checks it
		ops = append(ops, Op{Code: FileIdentity, Ints: []uint64{boxUID, boxGID}},
			Op{Code: Sysinfo, Ints: []uint64{c.Total, usageFD, procFD, boxUID, boxGID}})
	}
	return append(ops, notifySysinfo(),
		Op{Code: Env, Strs: []string{sysinfoEnv + "=" + mode}},
		Op{Code: Exec, Ints: []uint64{boxUID, boxGID}, Strs: []string{bin, "/", bin}})
}

// sysinfoBox runs sysinfoOps, under filter f, in a PID and mount
// namespace of their own.
func sysinfoBox(t *testing.T, bin string, c sysinfoCase, answer bool, f Op) (Status, string) {
	t.Helper()
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	return runExecutorWith(t, encode(t, &Plan{Ops: withFilter(sysinfoOps(t, bin, c, answer, "1"), f)}), false, execOptions{attr: attr})
}

func bootSeconds(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Sec
}

// TestExecutorSysinfo: with a Sysinfo op, warden-exec's PID 1 answers
// the program's sysinfo(2) with the box's figures (the total given, what
// is free of it by the usage file, mem_unit 1, its own uptime, the
// processes of its PID namespace: PID 1 and the probe), the figures
// internal/nsinit's answerer computes from the same inputs; and it
// refuses a pointer the kernel would, writing nothing. The program holds
// no listener.
func TestExecutorSysinfo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for PID and mount namespaces")
	}
	executor(t)
	bin := sysinfoProgram(t)
	refusals := fmt.Sprintf("read-only: errno %d untouched true\nstraddling: errno %d untouched true\nnull: errno %d\nlisteners held: 0\n",
		unix.EFAULT, unix.EFAULT, unix.EFAULT)
	fs := filters(t)
	for _, c := range sysinfoCases(t) {
		for name, f := range fs {
			t.Run(c.Name+"/"+name, func(t *testing.T) { checkSysinfo(t, bin, c, f, refusals) })
		}
	}
}

// checkSysinfo runs the sysinfo probe under filter f and checks what it
// got against c.
func checkSysinfo(t *testing.T, bin string, c sysinfoCase, f Op, refusals string) {
	t.Helper()
	if c.Host {
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err != nil {
			t.Fatal(err)
		}
		c.Free = si.Totalram * uint64(si.Unit)
	}
	before := bootSeconds(t)
	st, out := sysinfoBox(t, bin, c, true, f)
	after := bootSeconds(t)
	if want := (Status{Kind: StatusRan, Op: st.Op}); st != want {
		t.Fatalf("status %+v, want %+v (output %q)", st, want, out)
	}
	first, rest, _ := strings.Cut(out, "\n")
	var uptime int64
	var total, free uint64
	var procs, unit int
	if _, err := fmt.Sscanf(first, "uptime %d total %d free %d procs %d unit %d", &uptime, &total, &free, &procs, &unit); err != nil {
		t.Fatalf("the probe's sysinfo %q: %v", first, err)
	}
	wantTotal := c.Total
	if c.Host {
		wantTotal = c.Free
	}
	if total != wantTotal || free != c.Free || procs != 2 || unit != 1 {
		t.Errorf("total %d free %d procs %d unit %d, want %d %d 2 1", total, free, procs, unit, wantTotal, c.Free)
	}
	if uptime < 0 || uptime > after-before+1 {
		t.Errorf("uptime %d s, want 0 to %d (the run's span)", uptime, after-before+1)
	}
	if rest != refusals {
		t.Errorf("refused pointers:\n%s\nwant\n%s", rest, refusals)
	}
}

// TestExecutorSysinfoFlood: a flood of sysinfo(2) calls past PID 1's
// pace gets every call answered, while PID 1 goes on draining the
// program's output (the program writes 4 MiB past a 1000-byte limit and
// ends) and reaping.
func TestExecutorSysinfoFlood(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for PID and mount namespaces")
	}
	executor(t)
	bin := sysinfoProgram(t)
	for name, f := range filters(t) {
		t.Run(name, func(t *testing.T) {
			var stderr string
			ops := withFilter(sysinfoOps(t, bin, sysinfoCase{Total: 1 << 20}, true, "flood"), f)
			ops = append([]Op{{Code: Drain, Ints: []uint64{1000, 1000}}}, ops...)
			attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
			st, out := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr, stderr: &stderr})
			if st.Kind != StatusRan || st.ExitCode != 0 {
				t.Fatalf("status %+v (stderr %q)", st, stderr)
			}
			if len(out) != 1001 {
				t.Errorf("stdout %d bytes, want 1001", len(out))
			}
			if want := fmt.Sprintf("calls %d failed 0 paced true\n", floodThreads*floodCalls); stderr != want {
				t.Errorf("the probe said %q, want %q", stderr, want)
			}
		})
	}
}

// TestExecutorSysinfoWithoutOp: without a Sysinfo op the filter has no
// listener, so a notified sysinfo(2) fails as the kernel makes it
// (ENOSYS), rather than waiting for an answer.
func TestExecutorSysinfoWithoutOp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for PID and mount namespaces")
	}
	executor(t)
	st, out := sysinfoBox(t, sysinfoProgram(t), sysinfoCase{Total: 1 << 20}, false, notifySysinfo())
	if st.Kind != StatusRan || st.ExitCode != 0 {
		t.Fatalf("status %+v (output %q)", st, out)
	}
	if want := fmt.Sprintf("sysinfo: %v\n", unix.ENOSYS); !strings.HasPrefix(out, want) {
		t.Errorf("the probe said %q, want it to start %q", out, want)
	}
}

// TestExecutorAnswersNotified: every syscall the notifying filter sends
// to the listener is one warden-exec's PID 1 answers (sysinfo.c answers
// sysinfo(2) alone, and any other with ENOSYS), as nsinit's
// TestAnswersCoverNotified holds the Go answerer to the same list.
func TestExecutorAnswersNotified(t *testing.T) {
	for _, nr := range seccomp.Notified {
		if nr != unix.SYS_SYSINFO {
			t.Errorf("the filter notifies syscall %d, which warden-exec's PID 1 does not answer (cmd/warden-exec/sysinfo.c)", nr)
		}
	}
}

// filters are the Seccomp ops the sysinfo tests run under: the small test
// filter (sysinfo notified, all else allowed) and the production one the
// Go init installs (seccomp.NotifyingProgram), which warden-exec's PID 1
// lives under too.
func filters(t *testing.T) map[string]Op {
	t.Helper()
	prog, err := seccomp.NotifyingProgram()
	if err != nil {
		t.Skipf("the production filter: %v", err)
	}
	prod := Op{Code: Seccomp}
	for _, in := range prog {
		prod.Ints = append(prod.Ints, uint64(in.Code)|uint64(in.Jt)<<16|uint64(in.Jf)<<24|uint64(in.K)<<32)
	}
	return map[string]Op{"test filter": notifySysinfo(), "production filter": prod}
}

// withFilter is ops with its Seccomp op replaced by f.
func withFilter(ops []Op, f Op) []Op {
	for i := range ops {
		if ops[i].Code == Seccomp {
			ops[i] = f
		}
	}
	return ops
}

// TestExecutorSysinfoMaps: PID 1's writable-range check reads a maps file
// of many steps (3000 mappings, writable and read-only in turn): a
// writable target is answered, a read-only one and one straddling into
// read-only memory get EFAULT with nothing written.
func TestExecutorSysinfoMaps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for PID and mount namespaces")
	}
	executor(t)
	bin := sysinfoProgram(t)
	want := fmt.Sprintf("maps over 8 KiB: true\nstack: errno 0 unit 1\nhighest writable: errno 0\nhighest read-only: errno %d\nstraddling: errno %d untouched true\n",
		unix.EFAULT, unix.EFAULT)
	for name, f := range filters(t) {
		t.Run(name, func(t *testing.T) {
			ops := withFilter(sysinfoOps(t, bin, sysinfoCase{Total: 1 << 20}, true, "maps"), f)
			attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
			st, out := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr})
			if st.Kind != StatusRan || st.ExitCode != 0 {
				t.Fatalf("status %+v (output %q)", st, out)
			}
			if out != want {
				t.Errorf("the probe said:\n%s\nwant:\n%s", out, want)
			}
		})
	}
}

// TestExecutorSysinfoHostStalled: a host that leaves stdout unread (its
// pipe full, PID 1's relay waiting) still gets every sysinfo call
// answered and the program reaped: it reads the probe's report on stderr
// first, and only then stdout, which arrives whole.
func TestExecutorSysinfoHostStalled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for PID and mount namespaces")
	}
	executor(t)
	or, ow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer or.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	type result struct {
		report string
		stdout int
	}
	done := make(chan result, 1)
	go func() {
		var res result
		line := make([]byte, 0, 128)
		b := make([]byte, 1)
		for len(line) < cap(line) { // the report, a line
			if n, err := er.Read(b); n == 0 || err != nil || b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		res.report = string(line)
		n, _ := io.Copy(io.Discard, or)
		res.stdout = int(n)
		done <- res
	}()
	ops := sysinfoOps(t, sysinfoProgram(t), sysinfoCase{Total: 1 << 20}, true, "flood")
	ops = append([]Op{{Code: Drain, Ints: []uint64{2 * floodBytes, 2 * floodBytes}}}, ops...)
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	closeOurs := func(t *testing.T) {
		for _, f := range []*os.File{ow, ew} {
			if err := f.Close(); err != nil {
				t.Errorf("closing the test's end of a host pipe: %v", err)
			}
		}
	}
	st, _ := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr, stdout: ow, stderrFile: ew, after: closeOurs})
	if st.Kind != StatusRan || st.ExitCode != 0 {
		t.Errorf("status %+v, want the program run", st)
	}
	select {
	case res := <-done:
		if want := fmt.Sprintf("calls %d failed 0 paced true", floodThreads*floodCalls); res.report != want {
			t.Errorf("the probe said %q, want %q", res.report, want)
		}
		if res.stdout != floodBytes {
			t.Errorf("stdout %d bytes, want %d", res.stdout, floodBytes)
		}
	case <-time.After(time.Minute):
		t.Fatal("the host's pipes did not end within a minute")
	}
}
