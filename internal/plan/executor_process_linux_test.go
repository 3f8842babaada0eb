package plan

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the program the process ops are checked
// with (probeEnv) and as the Go applier's process (applyEnv): both need a
// process of their own, since the ops change the process that applies
// them.
const (
	probeEnv = "WARDEN_PLAN_PROBE"
	applyEnv = "WARDEN_PLAN_APPLY"
	cgnsEnv  = "WARDEN_PLAN_CGNS"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(probeEnv) != "":
		fmt.Print(probe())
		os.Exit(0)
	case os.Getenv(applyEnv) != "":
		os.Exit(applyThenProbe(os.Getenv(applyEnv)))
	case os.Getenv(sysinfoEnv) == "flood":
		fmt.Fprint(os.Stderr, sysinfoFlood())
		os.Exit(0)
	case os.Getenv(sysinfoEnv) != "":
		fmt.Print(sysinfoProbe())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// probe describes what the process ops leave for the program.
func probe() string {
	var b strings.Builder
	ns, _ := os.Readlink("/proc/self/ns/cgroup")
	fmt.Fprintf(&b, "new cgroup namespace: %v\n", ns != os.Getenv(cgnsEnv))
	// Sockets, not descriptors: the Go runtime opens files of its own.
	fmt.Fprintf(&b, "inherited sockets: %d\n", sockets())
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Groups:") {
			fmt.Fprintf(&b, "%s\n", strings.TrimSpace(l))
		}
	}
	up := false
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err == nil {
		if ifr, err := unix.NewIfreq("lo"); err == nil && unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr) == nil {
			up = ifr.Uint16()&unix.IFF_UP != 0
		}
		unix.Close(fd)
	}
	fmt.Fprintf(&b, "lo up: %v\n", up)
	fmt.Fprintf(&b, "CPUs: %d\n", cpuCount())
	return b.String()
}

// cpuCount is how many CPUs this thread may run on, or -1.
func cpuCount() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return -1
	}
	return set.Count()
}

// sockets counts the process's descriptors that are sockets.
func sockets() int {
	n := 0
	for fd := range 256 {
		if l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// applyThenProbe applies the hex-encoded plan with Apply from one locked
// thread, as the Go init does, then executes the probe from it, or
// prints the errno the plan failed with.
func applyThenProbe(enc string) int {
	runtime.LockOSThread()
	b, err := hex.DecodeString(enc)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	p, err := Decode(b)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for i, op := range p.Ops {
		if err := apply(op); err != nil {
			var errno syscall.Errno
			if !errors.As(err, &errno) {
				fmt.Println(err)
				return 1
			}
			fmt.Printf("op %d failed: errno %d\n", i, int(errno))
			return 0
		}
	}
	env := append(os.Environ(), probeEnv+"=1")
	fmt.Println(syscall.Exec("/proc/self/exe", []string{os.Args[0]}, env))
	return 1
}

// processAttr runs an applier in a network namespace of its own with
// supplementary groups, so the ops have something to change.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		Credential: &syscall.Credential{Groups: []uint32{1, 2}},
	}
}

// applyGo applies ops in a new process with Apply and returns what the
// probe saw or the errno it stopped at.
func applyGo(t *testing.T, ops []Op, extra []*os.File) string {
	t.Helper()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), applyEnv+"="+hex.EncodeToString(encode(t, &Plan{Ops: ops})))
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = processAttr()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the Go applier: %v (%q)", err, out)
	}
	return string(out)
}

// applyC applies ops with warden-exec, the probe as its program, and
// returns what the probe saw or the errno it stopped at.
func applyC(t *testing.T, ops []Op, extra []*os.File) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := os.Readlink("/proc/self/ns/cgroup")
	all := append(ops,
		Op{Code: Env, Strs: []string{probeEnv + "=1", cgnsEnv + "=" + ns}},
		Op{Code: Exec, Ints: self(), Strs: []string{bin, "/", bin}})
	st, out := runExecutorWith(t, encode(t, &Plan{Ops: all}), false, execOptions{extra: extra[1:], attr: processAttr()})
	switch st.Kind {
	case StatusRan:
		return out
	case StatusSetup:
		return fmt.Sprintf("op %d failed: errno %d\n", st.Op, st.Errno)
	}
	t.Fatalf("status %+v", st)
	return ""
}

// pair is a connected socket pair; hungUp closes the peer of the first.
func pair(t *testing.T, hungUp bool) (*os.File, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { a.Close(); b.Close() })
	if hungUp {
		b.Close()
	}
	return a, b
}

// TestProcessOpsAsGo: the ops on the init's own process leave the
// program the same process whether Go or warden-exec applies them: a new
// cgroup namespace, no inherited descriptor, no supplementary group, lo
// up, one CPU; and both fail alike.
func TestProcessOpsAsGo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and groups")
	}
	executor(t)
	ns, _ := os.Readlink("/proc/self/ns/cgroup")
	t.Setenv(cgnsEnv, ns)
	setUp := []Op{
		{Code: Unshare, Ints: []uint64{unix.CLONE_NEWCGROUP}},
		{Code: CloseRange, Ints: []uint64{3, ^uint64(0), unix.CLOSE_RANGE_CLOEXEC}},
		{Code: FileIdentity, Ints: self()},
		{Code: DieWithHost, Ints: []uint64{uint64(unix.SIGKILL), 3}},
		{Code: LinkUp, Strs: []string{"lo"}},
		{Code: LimitCPUs, Ints: []uint64{1}},
	}
	cpus := cpuCount()
	if cpus < 2 {
		t.Logf("only %d CPU here: LimitCPUs has nothing to narrow", cpus)
	}
	tests := []struct {
		name   string
		ops    []Op
		hungUp bool
		want   string
	}{
		{"set up", setUp, false, "new cgroup namespace: true\ninherited sockets: 0\nGroups:\nlo up: true\nCPUs: 1\n"},
		{"nothing", nil, false, fmt.Sprintf("new cgroup namespace: false\ninherited sockets: 2\nGroups:\t1 2\nlo up: false\nCPUs: %d\n", cpus)},
		{"host gone", []Op{{Code: DieWithHost, Ints: []uint64{uint64(unix.SIGKILL), 4}}}, true, fmt.Sprintf("op 0 failed: errno %d\n", unix.EPIPE)},
		{"no such link", []Op{{Code: LinkUp, Strs: []string{"nosuchlink0"}}}, false, fmt.Sprintf("op 0 failed: errno %d\n", unix.ENODEV)},
		{"bad close_range", []Op{{Code: CloseRange, Ints: []uint64{5, 4, 0}}}, false, fmt.Sprintf("op 0 failed: errno %d\n", unix.EINVAL)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctl, _ := pair(t, false)
			four, _ := pair(t, tc.hungUp)
			extra := []*os.File{ctl, four}
			if got := applyGo(t, tc.ops, extra); got != tc.want {
				t.Errorf("after Go:\n%s\nwant\n%s", got, tc.want)
			}
			if got := applyC(t, tc.ops, extra); got != tc.want {
				t.Errorf("after warden-exec:\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestJoinCgroupAsGo: JoinCgroup writes "0" to each descriptor the host
// sends and closes it, in either applier, and fails alike when the host
// hung up or sent too many.
func TestJoinCgroupAsGo(t *testing.T) {
	executor(t)
	tests := []struct {
		name  string
		send  int
		max   uint64
		errno syscall.Errno
	}{
		{"two tasks files", 2, 4, 0},
		{"host gone", -1, 4, unix.EPIPE},
		{"too many", 3, 2, unix.EMSGSIZE},
		{"bound", 1, maxRights + 1, unix.EINVAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, who := range []string{"Go", "warden-exec"} {
				dir := t.TempDir()
				files := make([]*os.File, max(tc.send, 0))
				rights := make([]int, len(files))
				for i := range files {
					f, err := os.Create(fmt.Sprintf("%s/tasks%d", dir, i))
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					files[i], rights[i] = f, int(f.Fd())
				}
				sock, peer := pair(t, false)
				send := func(t *testing.T) {
					if tc.send < 0 {
						peer.Close()
						return
					}
					if err := unix.Sendmsg(int(peer.Fd()), []byte{0}, unix.UnixRights(rights...), nil, 0); err != nil {
						t.Fatal(err)
					}
				}
				var got syscall.Errno
				if who == "Go" {
					send(t)
					err := joinCgroup(int(sock.Fd()), int(tc.max))
					if err != nil && !errors.As(err, &got) {
						t.Fatal(err)
					}
				} else {
					ops := []Op{{Code: JoinCgroup, Ints: []uint64{4, tc.max}}, program("/bin/true")}
					st, _ := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{extra: []*os.File{sock}, after: send})
					got = syscall.Errno(st.Errno)
				}
				if got != tc.errno {
					t.Errorf("%s: errno %v, want %v", who, got, tc.errno)
				}
				for _, f := range files {
					b, err := os.ReadFile(f.Name())
					if err != nil {
						t.Fatal(err)
					}
					if want := map[bool]string{true: "0", false: ""}[tc.errno == 0]; string(b) != want {
						t.Errorf("%s: %s holds %q, want %q", who, f.Name(), b, want)
					}
				}
			}
		})
	}
}
