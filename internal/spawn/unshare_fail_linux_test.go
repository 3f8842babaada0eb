package spawn

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/plan"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// sandboxFlags are the namespaces internal/native has warden-exec make.
const sandboxFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// mapped drives the handshake with the warden-exec cmd by hand, as
// converse does, up to the MAPPED message asking for flags, and returns
// the conversation.
func mapped(t *testing.T, cmd *exec.Cmd, host *os.File, flags uint64) *unshareConn {
	t.Helper()
	h := &unshareConn{ctl: int(host.Fd()), pidfd: -1, pid: cmd.Process.Pid}
	if err := h.send(binary.LittleEndian.AppendUint32([]byte(plan.HelloTag), plan.Version)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.expect(plan.UsernsTag); err != nil {
		t.Fatal(err)
	}
	if err := writeIDMaps(cmd.Process.Pid, Init{UID: 1234567, GID: 1234567}); err != nil {
		t.Fatal(err)
	}
	m := binary.LittleEndian.AppendUint64([]byte(plan.MappedTag), flags)
	if err := h.send(binary.LittleEndian.AppendUint64(m, 0)); err != nil {
		t.Fatal(err)
	}
	return h
}

// noChildren fails t if the calling (locked) thread, whose children
// warden-exec's PID 1 would be among, has a child, reaped or not. Other
// tests' children belong to other threads.
func noChildren(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/children")
	if err != nil || strings.TrimSpace(string(b)) != "" {
		t.Errorf("this thread's children: %q (%v), want none", b, err)
	}
}

// TestUnshareAbandonEndsPID1: a start that fails after warden-exec has
// forked PID 1 (here: before the host read its pid) leaves no process:
// neither the first process nor PID 1, which only warden-exec knew of.
func TestUnshareAbandonEndsPID1(t *testing.T) {
	testhost.RequireRoot(t)
	runtime.LockOSThread() // PID 1 is this thread's child
	defer runtime.UnlockOSThread()
	host, child := controlPair(t)
	cmd := started(t, child, false, builtExecutor(t))
	h := mapped(t, cmd, host, sandboxFlags&^unix.CLONE_NEWUSER)
	// PID 1's pid is on the socket once it is forked.
	if err := h.wait(unix.POLLIN); err != nil {
		t.Fatal(err)
	}
	err := abandon(cmd, host, errors.New("the host gave up"))
	if err == nil || err.Error() != "the host gave up" {
		t.Errorf("abandon = %v, want the host's error alone", err)
	}
	noChildren(t)
}

// TestPID1EndsWhenTheHostHangsUp: a host that closes its socket right
// after it has learnt PID 1's pid ends PID 1 (EOF where its plan would be).
func TestPID1EndsWhenTheHostHangsUp(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	host, p := madePID1(t)
	host.Close()
	if e := waitBounded(t, p); e.Status.ExitStatus() != 111 {
		t.Errorf("PID 1 after the host hung up ended %v, want exit status 111", e)
	}
}

// TestPID1WaitsForItsPlanBounded: PID 1 whose host keeps the socket open
// but sends no plan ends by itself (HOST_WAIT_MS) rather than waiting for
// good with the sandbox's namespaces.
func TestPID1WaitsForItsPlanBounded(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, p := madePID1(t) // the host's end stays open until the cleanup
	if e := waitBounded(t, p); e.Status.ExitStatus() != 111 {
		t.Errorf("PID 1 sent no plan ended %v, want exit status 111 (no host)", e)
	}
}

// madePID1 has a warden-exec built from this tree make its namespaces and
// PID 1, reaps its first process, and returns the host's end of the
// control socket and PID 1, to which the caller sends nothing. The
// caller's goroutine is locked to its thread: PID 1 is that thread's child.
func madePID1(t *testing.T) (*os.File, *PID1) {
	t.Helper()
	testhost.RequireRoot(t)
	host, child := controlPair(t)
	cmd := started(t, child, false, builtExecutor(t))
	h := mapped(t, cmd, host, sandboxFlags&^unix.CLONE_NEWUSER)
	pid, err := h.expect(plan.PidTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("warden-exec's first process: %v", err)
	}
	p, err := openChild(int(pid))
	if err != nil {
		t.Fatal(err)
	}
	return host, p
}

// TestUnshareRefusesFlags: warden-exec unshares only the sandbox's
// namespaces, and at least its mount and PID ones; anything else in
// MAPPED is refused at that step, before any unshare.
func TestUnshareRefusesFlags(t *testing.T) {
	testhost.RequireRoot(t)
	base := uint64(sandboxFlags &^ unix.CLONE_NEWUSER)
	for _, c := range []struct {
		name  string
		flags uint64
	}{
		{"a second user namespace", base | unix.CLONE_NEWUSER},
		{"no PID namespace", base &^ unix.CLONE_NEWPID},
		{"no mount namespace", base &^ unix.CLONE_NEWNS},
		{"no namespace at all", 0},
		{"a time namespace", base | unix.CLONE_NEWTIME},
		{"a shared file table", base | unix.CLONE_FILES},
		{"high bits", base | 1<<40},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			host, child := controlPair(t)
			cmd := started(t, child, false, builtExecutor(t))
			h := mapped(t, cmd, host, c.flags)
			_, err := h.expect(plan.PidTag)
			if !errors.Is(err, unix.EPROTO) || !strings.Contains(err.Error(), "reading the host's id maps message") {
				t.Errorf("MAPPED with flags %#x: %v, want warden-exec's EPROTO at that step", c.flags, err)
			}
			host.Close()
			_ = cmd.Wait()
			if err := killStrays(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestOpenChildRefusesNonChildren: a pid warden-exec reports is taken
// only if it is an unreaped child of this process.
func TestOpenChildRefusesNonChildren(t *testing.T) {
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pid  int
		want string
	}{
		{"the host's own init", 1, "which is not this process's child: refusing it"},
		{"this process's parent", os.Getppid(), "which is not this process's child: refusing it"},
		{"a child already reaped", done.Process.Pid, "opening a pidfd for warden-exec's PID 1"},
	} {
		p, err := openChild(c.pid)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (pid %d): openChild = %v, %v; want an error with %q", c.name, c.pid, p, err, c.want)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := openChild(live.Process.Pid)
	if err != nil {
		t.Fatalf("openChild of a live child: %v", err)
	}
	if err := p.kill(); err != nil {
		t.Errorf("killing a live child through its pidfd: %v", err)
	}
	if err := p.Signal(unix.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after Reap = %v, want os.ErrProcessDone", err)
	}
}

// TestUnshareConstants: the C side's wait bound and message size are the
// host's.
func TestUnshareConstants(t *testing.T) {
	hdr, err := os.ReadFile("../../cmd/warden-exec/exec.h")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"HOST_WAIT_MS": UnshareWait.Milliseconds(), "MSG_BYTES": msgBytes} {
		m := regexp.MustCompile(`#define ` + name + ` (\d+)`).FindSubmatch(hdr)
		if m == nil {
			t.Errorf("exec.h defines no %s", name)
			continue
		}
		if got, _ := strconv.ParseInt(string(m[1]), 10, 64); got != want {
			t.Errorf("exec.h %s = %d, want %d as in unshare_linux.go", name, got, want)
		}
	}
	if UnshareWait < time.Second {
		t.Errorf("UnshareWait = %s: too short for a loaded host", UnshareWait)
	}
}
