package main

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// nsCase is one set of namespaces to create around /bin/true.
type nsCase struct {
	name  string
	flags uintptr
}

// measureNamespaces reports what creating each namespace set costs, the
// network namespace apart: it is the one with a reputation for being slow
// (its teardown is asynchronous in the kernel and can back up).
func measureNamespaces(n int) {
	base := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	cases := []nsCase{
		{"no namespaces", 0},
		{"user+pid+mount+ipc+uts", base},
		{"user+pid+mount+ipc+uts+net", base | syscall.CLONE_NEWNET},
	}
	samples := make([][]time.Duration, len(cases))
	for round := 0; round < n; round++ {
		for i, c := range cases {
			d, err := timeClone(c.flags)
			if err != nil {
				fmt.Printf("\nnamespace cost: skipped (%s: %v)\n", c.name, err)
				return
			}
			samples[i] = append(samples[i], d)
		}
	}
	fmt.Printf("\n| namespaces around /bin/true | median ms | p90 ms |\n|---|---:|---:|\n")
	for i, c := range cases {
		fmt.Printf("| %s | %.2f | %.2f |\n", c.name, ms(median(samples[i])), ms(pct(samples[i], 0.9)))
	}
}

func timeClone(flags uintptr) (time.Duration, error) {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	if flags&syscall.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: syscall.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: syscall.Getgid(), Size: 1}}
	}
	start := time.Now()
	err := cmd.Run()
	return time.Since(start), err
}
