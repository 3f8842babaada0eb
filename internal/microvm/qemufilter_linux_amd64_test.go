package microvm

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/seccomp"
)

// TestQEMUFilter installs QEMU's filter on a thread of the test's own and
// shows what it refuses, with the errno a caller gets, and what it lets
// through. Every refused call is refused before it runs, so none of them
// changes anything even if the filter were broken... except that a broken
// filter lets them run: each is made harmless (bad arguments, or a change
// confined to this thread, which the runtime then ends).
func TestQEMUFilter(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("QEMU's filter is written for amd64")
	}
	type result struct {
		name string
		err  error
	}
	done := make(chan []result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the filtered thread ends with the goroutine
		if err := confineThread(); err != nil {
			done <- []result{{"confineThread", err}}
			return
		}
		var rs []result
		sock := func(domain int) error {
			fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"socket(AF_INET)", func() error { return sock(unix.AF_INET) }},
			{"socket(AF_VSOCK)", func() error { return sock(unix.AF_VSOCK) }},
			{"socket(AF_NETLINK)", func() error {
				fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
				if err == nil {
					unix.Close(fd)
				}
				return err
			}},
			{"socket(AF_UNIX)", func() error { return sock(unix.AF_UNIX) }},
			{"unshare(CLONE_NEWUSER)", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
			{"clone(CLONE_NEWUSER)", func() error {
				// CLONE_NEWUSER with CLONE_FS is always EINVAL, so the kernel refuses it if it gets that far
				_, _, e := unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS, 0, 0)
				return errnoErr(e)
			}},
			{"modify_ldt", func() error {
				// func 0 reads the LDT into a buffer of 0 bytes: nothing
				_, _, e := unix.RawSyscall(unix.SYS_MODIFY_LDT, 0, 0, 0)
				return errnoErr(e)
			}},
			{"open_tree_attr", func() error {
				// fd -1 with no path: EBADF if it gets that far
				_, _, e := unix.RawSyscall6(seccompNr(t, "open_tree_attr"), ^uintptr(0), 0, 0, 0, 0, 0)
				return errnoErr(e)
			}},
			{"clone3", func() error {
				_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
				return errnoErr(e)
			}},
			{"ptrace", func() error {
				_, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 0, 0)
				return errnoErr(e)
			}},
			{"bpf", func() error {
				_, _, e := unix.RawSyscall(unix.SYS_BPF, ^uintptr(0), 0, 0)
				return errnoErr(e)
			}},
			{"io_uring_setup", func() error {
				_, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
				return errnoErr(e)
			}},
			{"keyctl", func() error {
				_, _, e := unix.RawSyscall(unix.SYS_KEYCTL, ^uintptr(0), 0, 0)
				return errnoErr(e)
			}},
			{"mount", func() error { return unix.Mount("", "/nonexistent-warden", "", 0, "") }},
			{"setns", func() error { return unix.Setns(-1, 0) }},
		} {
			rs = append(rs, result{c.name, c.call()})
		}
		done <- rs
	}()
	want := map[string]error{"socket(AF_UNIX)": nil, "clone3": unix.ENOSYS}
	for _, r := range <-done {
		w, ok := want[r.name]
		if !ok {
			w = unix.EPERM
		}
		if !errors.Is(r.err, w) && !(w == nil && r.err == nil) {
			t.Errorf("%s under QEMU's filter = %v, want %v", r.name, r.err, w)
		}
	}
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// seccompNr is the number of a syscall of seccomp.Denied, as QEMU's
// filter has it (x/sys/unix may not know the newest).
func seccompNr(t *testing.T, name string) uintptr {
	i := slices.Index(seccomp.Denied, name)
	if i < 0 {
		t.Errorf("%s is not in seccomp.Denied", name)
		return ^uintptr(0)
	}
	return uintptr(seccomp.DeniedNumbers[i])
}

// TestQEMUFilterPrologue: the filter starts by killing QEMU for another
// ABI (i386, or x32's numbers) and by refusing with ENOSYS every number
// above the table it was written for. Shown on the program's words, not
// by running such calls: a broken filter would let them through.
func TestQEMUFilterPrologue(t *testing.T) {
	prog := qemuFilter()
	ld := uint16(unix.BPF_LD | unix.BPF_W | unix.BPF_ABS)
	jmp := func(op uint16) uint16 { return unix.BPF_JMP | op | unix.BPF_K }
	want := []struct {
		code uint16
		k    uint32
		// the action where the jump is taken (jt) or not (jf), or 0 for the next word
		jt, jf uint32
	}{
		{ld, dataArch, 0, 0},
		{jmp(unix.BPF_JEQ), unix.AUDIT_ARCH_X86_64, 0, unix.SECCOMP_RET_KILL_PROCESS},
		{ld, dataNr, 0, 0},
		{jmp(unix.BPF_JGE), x32Bit, unix.SECCOMP_RET_KILL_PROCESS, 0},
		{jmp(unix.BPF_JGT), seccomp.HighestNumber, unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS), 0},
	}
	for i, w := range want {
		got := prog[i]
		if got.Code != w.code || got.K != w.k {
			t.Fatalf("QEMU's filter word %d = %+v, want code %#x k %#x", i, got, w.code, w.k)
		}
		for _, br := range []struct {
			off    uint8
			action uint32
		}{{got.Jt, w.jt}, {got.Jf, w.jf}} {
			if to := i + 1 + int(br.off); br.action != 0 && (prog[to].Code != unix.BPF_RET|unix.BPF_K || prog[to].K != br.action) {
				t.Errorf("QEMU's filter word %d jumps to %+v, want return %#x", i, prog[to], br.action)
			} else if br.action == 0 && br.off != 0 {
				t.Errorf("QEMU's filter word %d jumps %d ahead, want the next word", i, br.off)
			}
		}
	}
}

// TestQEMUFilterDeniesPolicy: every syscall the project never allows
// (seccomp.Denied) is refused QEMU too.
func TestQEMUFilterDeniesPolicy(t *testing.T) {
	prog := qemuFilter()
	eperm := unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	refuses := func(nr uint32) bool {
		for i, f := range prog {
			if f.Code == unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K && f.K == nr && prog[i+1+int(f.Jt)] == eperm {
				return true
			}
		}
		return false
	}
	for i, nr := range seccomp.DeniedNumbers {
		if !refuses(nr) {
			t.Errorf("QEMU's filter does not refuse %s (%d) with EPERM", seccomp.Denied[i], nr)
		}
	}
}

// TestQEMUFilterAssembles: the filter's jumps resolve (assemble panics on
// a bad one) and it fits the kernel's limit.
func TestQEMUFilterAssembles(t *testing.T) {
	if n := len(qemuFilter()); n == 0 || n > unix.BPF_MAXINSNS {
		t.Errorf("QEMU's filter has %d instructions, want 1-%d", n, unix.BPF_MAXINSNS)
	}
}
