package spawn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// builtExecutor compiles warden-exec from its sources, as make build
// does.
func builtExecutor(t *testing.T) string {
	t.Helper()
	return testhost.Executor(t)
}

// controlPair is a control socket: the host's end, and the child's,
// which the test closes once the child has it.
func controlPair(t *testing.T) (host, child *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, child = os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "child")
	t.Cleanup(func() { host.Close(); child.Close() })
	return host, child
}

// started starts path (with args) as Command starts warden-exec for
// i.Unshares: no namespace, the control socket at fd 3; keep keeps this
// process's copy of the child's end open.
func started(t *testing.T, child *os.File, keep bool, path string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := &exec.Cmd{
		Path: path, Args: append([]string{nsinit.ExecName}, args...), ExtraFiles: []*os.File{child},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !keep {
		child.Close()
	}
	return cmd
}

// procStatus is the fields of /proc/pid/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}

// TestUnshareMakesPID1: warden-exec started in this process's namespaces
// makes the user namespace with the maps written here, the other
// namespaces, and PID 1 of the new PID namespace as this process's child,
// with exactly the capabilities a clone with AmbientCaps gives; PID 1
// ends (111, no host) when the host's end closes.
func TestUnshareMakesPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("maps a pool uid: needs root")
	}
	runtime.LockOSThread() // PID 1's parent-death signal is tied to this thread
	defer runtime.UnlockOSThread()
	host, child := controlPair(t)
	cmd := started(t, child, false, builtExecutor(t))
	caps := []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_KILL}
	i := Init{UID: 1234567, GID: 1234568, Exec: true, Unshares: true, AmbientCaps: caps,
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP}
	pid1, err := Unshare(cmd, i, host)
	if err != nil {
		t.Fatalf("Unshare: %v", err)
	}
	st := procStatus(t, pid1.Pid)
	mask := fmt.Sprintf("%016x", capMask(caps))
	want := map[string]string{
		"NSpid": strconv.Itoa(pid1.Pid) + "\t1", "PPid": strconv.Itoa(os.Getpid()),
		"CapPrm": mask, "CapEff": mask, "CapInh": mask, "CapAmb": mask,
	}
	for k, w := range want {
		if st[k] != w {
			t.Errorf("PID 1's %s = %q, want %q", k, st[k], w)
		}
	}
	dir := "/proc/" + strconv.Itoa(pid1.Pid) + "/"
	for file, w := range map[string]string{"uid_map": "1000 1234567 1", "gid_map": "1000 1234568 1", "setgroups": "deny"} {
		b, err := os.ReadFile(dir + file)
		if got := strings.Join(strings.Fields(string(b)), " "); err != nil || got != w {
			t.Errorf("PID 1's %s = %q (%v), want %q", file, got, err, w)
		}
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		its, err := os.Readlink(dir + "ns/" + ns)
		if err != nil || its == mine {
			t.Errorf("PID 1's %s namespace is %q (%v), this process's %q: want a new one", ns, its, err, mine)
		}
	}
	assertOwnedByUserns(t, dir)
	host.Close()
	if e := waitBounded(t, pid1); e.Status.ExitStatus() != 111 {
		t.Errorf("PID 1 without a host ended %v, want exit status 111", e)
	}
}

// assertOwnedByUserns checks that each namespace of the process of the
// /proc directory dir is owned by its user namespace (NS_GET_USERNS), as
// when the host cloned it into all of them at once.
func assertOwnedByUserns(t *testing.T, dir string) {
	t.Helper()
	var user unix.Stat_t
	if err := unix.Stat(dir+"ns/user", &user); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		f, err := os.Open(dir + "ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		owner, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_USERNS)
		f.Close()
		if err != nil {
			t.Errorf("NS_GET_USERNS of PID 1's %s namespace: %v", ns, err)
			continue
		}
		var got unix.Stat_t
		err = unix.Fstat(owner, &got)
		unix.Close(owner)
		if err != nil || got.Ino != user.Ino || got.Dev != user.Dev {
			t.Errorf("PID 1's %s namespace is owned by user namespace inode %d (%v), want PID 1's own, %d", ns, got.Ino, err, user.Ino)
		}
	}
}

// waitBounded reaps p, killing it if it has not ended within a minute,
// so a broken executor fails the test rather than hangs it.
func waitBounded(t *testing.T, p *PID1) *Exit {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() { _ = p.Signal(unix.SIGKILL) })
	defer timer.Stop()
	e, err := p.Reap()
	if err != nil || e == nil {
		t.Fatalf("reaping PID 1: %v", err)
	}
	return e
}

// TestUnshareRefusals: a start that goes wrong fails in one line naming
// why, and no wait outlasts the first process.
func TestUnshareRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		// script runs as the first process, with the socket at fd 3
		script string
		// keep keeps the test's copy of the child's end open, as the
		// host does while it starts warden-exec: no EOF ends a wait.
		keep bool
		want string
	}{
		{"another build's status", `printf '\003\000\000\000\377\377\377\377\000\000\000\000\000\000\000\000\000\000\000\000' >&3; exec sleep 5`, false, `warden-exec answered "\x03\x00\x00\x00" where this warden expected "WXUS": it is from another build`},
		{"ended silently", `exit 7`, true, "warden-exec ended while making the namespaces, before it answered"},
		{"closed its socket", `exec 3>&-; exec sleep 5`, false, "warden-exec closed its control socket while making the namespaces"},
		{"failed step", `printf 'WXER\002\000\000\000\001\000\000\000' >&3; exec sleep 5`, false, "warden-exec: unsharing its user namespace: operation not permitted"},
		{"impossible pid", `exec unshare -U sh -c "printf 'WXUS\000\000\000\000\000\000\000\000WXPD\000\000\000\000\000\000\000\000' >&3; exec sleep 5"`, false, "warden-exec reported PID 1 as pid 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.LockOSThread() // Unshare reaps this thread's children
			defer runtime.UnlockOSThread()
			host, child := controlPair(t)
			cmd := started(t, child, c.keep, "/bin/sh", "-c", c.script)
			i := Init{UID: os.Geteuid(), GID: os.Getegid(), Exec: true, Unshares: true}
			if os.Geteuid() == 0 {
				i.UID, i.GID = 1234567, 1234567
			}
			_, err := Unshare(cmd, i, host)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Unshare = %v, want one line with %q", err, c.want)
			}
			if cmd.ProcessState == nil {
				t.Error("Unshare left its first process unreaped")
			}
		})
	}
}

// TestUnshareVersion: warden-exec refuses a hello of another version.
func TestUnshareVersion(t *testing.T) {
	host, child := controlPair(t)
	cmd := started(t, child, false, builtExecutor(t))
	defer func() { _ = cmd.Wait() }()
	h := &unshareConn{ctl: int(host.Fd()), pidfd: -1, pid: cmd.Process.Pid}
	if err := h.send(binary.LittleEndian.AppendUint32([]byte(plan.HelloTag), plan.Version+1)); err != nil {
		t.Fatal(err)
	}
	_, err := h.expect(plan.UsernsTag)
	if !errors.Is(err, unix.EPROTO) || !strings.Contains(err.Error(), "reading the host's hello") {
		t.Errorf("a hello of version %d: %v, want warden-exec's EPROTO at the hello", plan.Version+1, err)
	}
}

// TestCommandUnsharesVforks: warden run's warden-exec (Unshares) is
// cloned into no namespace, with no id map or capability, which is what
// lets os/exec vfork it (syscall/exec_linux.go drops CLONE_VFORK for
// CLONE_NEWUSER); the spawner's inits, and the Go init, keep the clone
// into the namespaces.
func TestCommandUnsharesVforks(t *testing.T) {
	ns := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWPID)
	for _, c := range []struct {
		name       string
		i          Init
		cloneflags uintptr
		mapped     bool
	}{
		{"warden run's warden-exec", Init{Exec: true, Unshares: true, Cloneflags: ns, AmbientCaps: []uintptr{1}}, 0, false},
		{"the spawner's warden-exec", Init{Exec: true, Cloneflags: ns, AmbientCaps: []uintptr{1}}, ns, true},
		{"the Go init", Init{Unshares: true, Cloneflags: ns, AmbientCaps: []uintptr{1}}, ns, true},
	} {
		a := c.i.sysProcAttr(nil)
		if a.Cloneflags != c.cloneflags || (a.UidMappings != nil) != c.mapped || (a.GidMappings != nil) != c.mapped || (a.AmbientCaps != nil) != c.mapped {
			t.Errorf("%s: Cloneflags %#x, uid maps %v, gid maps %v, ambient %v; want Cloneflags %#x, mapped and ambient %v",
				c.name, a.Cloneflags, a.UidMappings, a.GidMappings, a.AmbientCaps, c.cloneflags, c.mapped)
		}
		if a.Pdeathsig != unix.SIGKILL {
			t.Errorf("%s: Pdeathsig %v, want SIGKILL", c.name, a.Pdeathsig)
		}
	}
}
