package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkInstall measures loading the filter on a fresh thread, as every
// sandbox does once: the kernel converts and compiles the program, then
// runs it once per syscall number to fill its action cache, so the cost
// follows how many instructions a number walks through.
// BenchmarkFreshThread is the same thread without the filter: the
// baseline to subtract.
func BenchmarkInstall(b *testing.B) { benchThread(b, true) }

// BenchmarkFreshThread is BenchmarkInstall's baseline.
func BenchmarkFreshThread(b *testing.B) { benchThread(b, false) }

func benchThread(b *testing.B, install bool) {
	if err := checkArch(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		errc := make(chan error)
		go func() {
			// Never unlocked: the thread, filter and all, exits with the
			// goroutine.
			runtime.LockOSThread()
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil || !install {
				errc <- err
				return
			}
			errc <- InstallOnThread()
		}()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}
