package plan

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestExecutorDrain: with a Drain op, the host gets a stream whole when
// it stays within its limit and exactly limit+1 bytes when it goes past
// (the program is not blocked: it finishes and its status comes), stdout
// and stderr each by its own limit; an orphan that holds the pipes open
// does not keep PID 1 from reporting, and what it writes later is lost
// with it. What is dropped is dropped in the box, never stored.
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
	// PID 1 drops what is past a limit by splicing it to /dev/null, or,
	// where that is not the null device, by reading it: both ways.
	for _, drop := range []string{"spliced", "read"} {
		for _, tc := range tests {
			t.Run(drop+"/"+tc.name, func(t *testing.T) {
				ops := []Op{path}
				var cover string
				if drop == "read" {
					cover = filepath.Join(t.TempDir(), "null")
					if err := os.WriteFile(cover, nil, 0o666); err != nil {
						t.Fatal(err)
					}
					ops = append(ops,
						Op{Code: Mount, Ints: []uint64{syscall.MS_REC | syscall.MS_PRIVATE, 0}, Strs: []string{"none", "/", "", ""}},
						Op{Code: Mount, Ints: []uint64{syscall.MS_BIND, 0}, Strs: []string{cover, "/dev/null", "", ""}})
				}
				ops = append(ops, Op{Code: Drain, Ints: tc.limits}, program("sh", "-c", tc.script))
				var stderr string
				attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
				st, stdout := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr, stderr: &stderr})
				if want := (Status{Kind: StatusRan, Op: int32(len(ops) - 1)}); st != want {
					t.Errorf("status %+v, want %+v", st, want)
				}
				if stdout != tc.stdout {
					t.Errorf("stdout %d bytes %.40q, want %d bytes %.40q", len(stdout), stdout, len(tc.stdout), tc.stdout)
				}
				if stderr != tc.stderr {
					t.Errorf("stderr %d bytes %.40q, want %d bytes %.40q", len(stderr), stderr, len(tc.stderr), tc.stderr)
				}
				if fi, err := os.Stat(cover); cover != "" && (err != nil || fi.Size() != 0) {
					t.Errorf("the file over /dev/null: %v, %v; want it empty", fi, err)
				}
			})
		}
	}
}

// TestExecutorDrainCopies: a host fd that splice cannot write (a file
// opened to append, as a terminal) gets its bytes copied instead, with
// the same limit.
func TestExecutorDrainCopies(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	tests := []struct {
		name, script, want string
	}{
		{"within the limit", "printf hello", "hello"},
		{"past the limit", "head -c 3000000 /dev/zero", strings.Repeat("\x00", 1001)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := os.OpenFile(filepath.Join(t.TempDir(), "out"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			ops := []Op{{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}, {Code: Drain, Ints: []uint64{1000, 1000}}, program("sh", "-c", tc.script)}
			attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
			st, _ := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr, stdout: out})
			if want := (Status{Kind: StatusRan, Op: 2}); st != want {
				t.Errorf("status %+v, want %+v", st, want)
			}
			got, err := os.ReadFile(out.Name())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("the file holds %d bytes %.40q, want %d bytes %.40q", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

// TestExecutorReapsOrphans: orphans that end while the program runs are
// reaped by PID 1 (no zombie is left in the box's /proc), and the
// program's own status still comes.
func TestExecutorReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for PID and mount namespaces")
	}
	proc := filepath.Join(t.TempDir(), "proc")
	if err := os.Mkdir(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	// Ten orphans end at once; the script then waits, at most 10 s, for
	// the box to hold no zombie, and says how many it last saw.
	script := `for i in 1 2 3 4 5 6 7 8 9 10; do (true &); done
for i in $(seq 200); do
	z=$(cat ` + proc + `/[0-9]*/stat 2>/dev/null | awk '$3 == "Z"' | wc -l)
	[ "$z" -eq 0 ] && break
	sleep 0.05
done
echo zombies $z; exit 7`
	ops := []Op{
		{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}},
		{Code: Mount, Ints: []uint64{syscall.MS_REC | syscall.MS_PRIVATE, 0}, Strs: []string{"none", "/", "", ""}},
		{Code: Mount, Ints: []uint64{0, 0}, Strs: []string{"proc", proc, "proc", ""}},
		{Code: Drain, Ints: []uint64{100, 100}},
		program("sh", "-c", script),
	}
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	st, out := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr})
	if want := (Status{Kind: StatusRan, Op: 4, ExitCode: 7}); st != want {
		t.Errorf("status %+v, want %+v", st, want)
	}
	if out != "zombies 0\n" {
		t.Errorf("the program said %q, want %q", out, "zombies 0\n")
	}
}
