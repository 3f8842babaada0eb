// Command probe386 is built with GOARCH=386: every system call it makes,
// starting with the Go runtime's own, goes through the i386 ABI (int 0x80),
// which the sandbox's seccomp filter must answer by killing the process.
// Outside a sandbox it prints its pid, which shows the host can run i386
// binaries at all.
package main

import (
	"fmt"
	"syscall"
)

func main() {
	fmt.Printf("getpid=%d\n", syscall.Getpid())
}
