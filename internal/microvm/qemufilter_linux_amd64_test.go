package microvm

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
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
				// a bad exit signal (CSIGNAL 0xff) makes the kernel refuse it if it gets that far
				_, _, e := unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|0xff, 0, 0)
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

// TestQEMUFilterAssembles: the filter's jumps resolve (assemble panics on
// a bad one) and it fits the kernel's limit.
func TestQEMUFilterAssembles(t *testing.T) {
	if n := len(qemuFilter()); n == 0 || n > unix.BPF_MAXINSNS {
		t.Errorf("QEMU's filter has %d instructions, want 1-%d", n, unix.BPF_MAXINSNS)
	}
}
