package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// behaviourCase is one run of TestExecutorBehaviour: the same warden run
// under both executors must end with the same exit code, stdout and
// stderr (warden's own notes included), and that code must be want.
type behaviourCase struct {
	name  string
	stdin string
	args  []string
	want  int
	// check, when set, looks at one side's outcome beyond the exit code.
	check func(t *testing.T, side string, inv invocation)
	// orphans: args hold orphanSlot, replaced on each side by a mark of
	// its own (orphanMark), and the run must leave no process with it.
	orphans bool
}

// orphanSlot stands in the orphans case's args for the seconds its
// children sleep, a number unique to the run and side (orphanMark).
const orphanSlot = "ORPHAN-MARK"

func behaviourCases() []behaviourCase {
	oneLine := func(want string) func(*testing.T, string, invocation) {
		return func(t *testing.T, side string, inv invocation) {
			msg := strings.TrimSuffix(inv.stderr, "\n")
			if !strings.HasPrefix(msg, "warden: ") || strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
				t.Errorf("%s: stderr %q, want one line starting \"warden: \" containing %q", side, inv.stderr, want)
			}
		}
	}
	return []behaviourCase{
		{name: "exit 0", args: []string{"--", "sh", "-c", "echo out; echo err >&2"}, want: 0},
		{name: "exit 1", args: []string{"--", "sh", "-c", "echo out; echo err >&2; exit 1"}, want: 1},
		{name: "timeout", args: []string{"--timeout", "1s", "--", "sleep", "60"}, want: 124},
		{name: "not executable", args: []string{"--", "/etc/passwd"}, want: 126},
		{name: "missing program", args: []string{"--", "no-such-program-x20"}, want: 127, check: oneLine("no-such-program-x20")},
		{name: "killed by signal 9", args: []string{"--", "sh", "-c", "kill -9 $$"}, want: 128 + 9},
		{name: "children outlive the program", args: []string{"--", "sh", "-c", "sleep " + orphanSlot + " & sleep " + orphanSlot + " & echo started"}, want: 0, orphans: true},
		{name: "output past --output-limit", args: []string{"--output-limit", "1KiB", "--", "sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; echo done >&2"}, want: 0, check: truncatedAt(1024)},
		{name: "program closes stdout", args: []string{"--", "sh", "-c", "exec >&-; echo lost; echo err >&2; exit 3"}, want: 3},
		{name: "stdin passthrough", stdin: "line one\nline two\n", args: []string{"--", "cat"}, want: 0, check: stdoutIs("line one\nline two\n")},
		{name: "bad --workspace", args: []string{"--workspace", "/nonexistent/x20-ws", "--", "true"}, want: 125, check: oneLine("/nonexistent/x20-ws")},
	}
}

// TestExecutorBehaviour runs the behaviour table under both executors:
// exit codes, the whole-tree kill, output past the limit, a closed
// stdout, stdin passthrough and warden's one-line errors.
func TestExecutorBehaviour(t *testing.T) {
	p := executors(t)
	for _, c := range behaviourCases() {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			var invs [2]invocation
			for i, side := range p.sides {
				args := append(append([]string{"run"}, side.flags...), c.args...)
				mark := ""
				if c.orphans {
					mark = orphanMark(t, i)
					for j := range args {
						args[j] = strings.ReplaceAll(args[j], orphanSlot, mark)
					}
				}
				invs[i] = warden(t, c.stdin, args...)
				if invs[i].code != c.want {
					t.Errorf("%s: exit %d, want %d (stdout %q, stderr %q)", side.name, invs[i].code, c.want, invs[i].stdout, invs[i].stderr)
				}
				if c.check != nil {
					c.check(t, side.name, invs[i])
				}
				if c.orphans {
					noOrphans(t, side.name, invs[i], mark)
				}
			}
			a, b := invs[0], invs[1]
			for _, f := range []struct{ name, a, b string }{
				{"exit code", strconv.Itoa(a.code), strconv.Itoa(b.code)},
				{"stdout", a.stdout, b.stdout},
				{"stderr", a.stderr, b.stderr},
			} {
				if f.a != f.b {
					t.Errorf("%s: %s got %q, %s got %q", f.name, p.sides[0].name, f.a, p.sides[1].name, f.b)
				}
			}
		})
	}
}

// orphanMark is a number of seconds for the orphans case's children to
// sleep, short and unique to this test process and side, so that they
// are found on the host by their command line and nothing else is. A
// cleanup kills any left (the sandbox failed to), once, bounded.
func orphanMark(t *testing.T, side int) string {
	mark := fmt.Sprintf("20.%d%d%d", os.Getpid(), time.Now().UnixNano()%1_000_000, side)
	t.Cleanup(func() {
		for _, p := range processesWith(orphanCmdline(mark)) {
			pid, err := strconv.Atoi(p)
			if err != nil {
				continue
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Logf("killing leftover sleep %s (pid %d): %v", mark, pid, err)
			}
		}
	})
	return mark
}

// orphanCmdline is the command line of a child sleeping for mark.
func orphanCmdline(mark string) string { return "sleep\x00" + mark + "\x00" }

// noOrphans checks that no child of the sandbox is left on the host: the
// whole tree is killed when the program ends. It waits, bounded, for the
// kernel to finish reaping.
func noOrphans(t *testing.T, side string, inv invocation, mark string) {
	t.Helper()
	if inv.stdout != "started\n" {
		t.Errorf("%s: stdout %q, want \"started\\n\"", side, inv.stdout)
	}
	var left []string
	for range 100 {
		if left = processesWith(orphanCmdline(mark)); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%s: the program's children outlived the sandbox: pids %v", side, left)
}

// processesWith lists the host's processes whose command line holds s.
func processesWith(s string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// truncatedAt checks that stdout stopped at limit bytes and warden said so.
func truncatedAt(limit int) func(*testing.T, string, invocation) {
	return func(t *testing.T, side string, inv invocation) {
		if len(inv.stdout) != limit || strings.Trim(inv.stdout, "x") != "" {
			t.Errorf("%s: stdout of %d bytes (%.20q...), want %d bytes of x", side, len(inv.stdout), inv.stdout, limit)
		}
		if !strings.Contains(inv.stderr, "warden: stdout truncated at 1KiB (--output-limit)") || !strings.Contains(inv.stderr, "done\n") {
			t.Errorf("%s: stderr %q, want the program's \"done\" and warden's truncation note", side, inv.stderr)
		}
	}
}

// stdoutIs checks stdout exactly.
func stdoutIs(want string) func(*testing.T, string, invocation) {
	return func(t *testing.T, side string, inv invocation) {
		if inv.stdout != want {
			t.Errorf("%s: stdout %q, want %q", side, inv.stdout, want)
		}
	}
}
