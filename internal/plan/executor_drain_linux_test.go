package plan

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestExecutorDrain: with a Drain op, the host gets a stream whole when
// it stays within its limit and exactly limit+1 bytes when it goes past
// (the program is not blocked: it finishes and its status comes), stdout
// and stderr each by its own limit; an orphan that holds the pipes open
// does not keep PID 1 from reporting, and what it writes later is lost
// with it.
func TestExecutorDrain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace, which ends the orphan")
	}
	path := Op{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}
	tests := []struct {
		name           string
		limits         []uint64
		script         string
		stdout, stderr string
	}{
		{"within the limits", []uint64{5, 3}, "printf hello; printf err >&2", "hello", "err"},
		{"empty", []uint64{0, 0}, "true", "", ""},
		{"stdout past its limit", []uint64{1000, 1 << 20}, "head -c 3000000 /dev/zero; printf err >&2",
			strings.Repeat("\x00", 1001), "err"},
		{"stderr past its limit", []uint64{1 << 20, 10}, "printf out; head -c 3000000 /dev/zero >&2",
			"out", strings.Repeat("\x00", 11)},
		{"a limit of 0 lets one byte through", []uint64{0, 0}, "echo out; echo err >&2", "o", "e"},
		{"an orphan holds the pipes", []uint64{100, 100}, "(sleep 20; echo late; echo late >&2) & echo early; echo early >&2",
			"early\n", "early\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := []Op{path, {Code: Drain, Ints: tc.limits}, program("sh", "-c", tc.script)}
			var stderr string
			attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
			st, stdout := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr, stderr: &stderr})
			if want := (Status{Kind: StatusRan, Op: 2}); st != want {
				t.Errorf("status %+v, want %+v", st, want)
			}
			if stdout != tc.stdout {
				t.Errorf("stdout %d bytes %.40q, want %d bytes %.40q", len(stdout), stdout, len(tc.stdout), tc.stdout)
			}
			if stderr != tc.stderr {
				t.Errorf("stderr %d bytes %.40q, want %d bytes %.40q", len(stderr), stderr, len(tc.stderr), tc.stderr)
			}
		})
	}
}
