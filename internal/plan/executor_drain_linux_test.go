package plan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestExecutorDrainNeedsPipes: DRAIN relays only to pipes (it splices,
// never blocking its loop on the host): a host whose stdout or stderr is
// a file, or closed (a drain pipe would then take fd 1 or 2), gets a
// clear refusal at the Drain op, not a relay that might block or store.
func TestExecutorDrainNeedsPipes(t *testing.T) {
	for _, stream := range []string{"stdout", "stderr", "closed"} {
		t.Run(stream, func(t *testing.T) {
			out, err := os.OpenFile(filepath.Join(t.TempDir(), "out"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			p := &Plan{Ops: []Op{{Code: Env, Strs: []string{"PATH=/usr/bin:/bin"}}, {Code: Drain, Ints: []uint64{1000, 1000}, Context: "draining the output"}, program("true")}}
			opts := execOptions{stdout: out}
			switch stream {
			case "stderr":
				opts = execOptions{stderrFile: out}
			case "closed":
				opts = execOptions{wrap: []string{"sh", "-c", `exec "$0" >&- 2>&-`}}
			}
			st, _ := runExecutorWith(t, encode(t, p), false, opts)
			if want := (Status{Kind: StatusSetup, Op: 1, Errno: int32(syscall.EINVAL)}); st != want {
				t.Fatalf("status %+v, want %+v", st, want)
			}
			want := "draining the output: the host's stdout or stderr is not a pipe; give the executor pipes as fds 1 and 2: invalid argument"
			if err := p.Err(st); err == nil || err.Error() != want {
				t.Errorf("Err = %v, want %q", err, want)
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

// bigPipeEnv runs the test binary as bigPipe, a program for TestExecutorDrainOwed.
const bigPipeEnv = "WARDEN_PLAN_BIGPIPE"

// bigPipeSize is how much bigPipe writes, and how large it makes its pipe.
const bigPipeSize = 1 << 20

// bigPipe grows its stdout pipe to bigPipeSize, fills it with bigPattern
// and exits, likely before PID 1 has relayed it all.
func bigPipe() int {
	if _, err := unix.FcntlInt(1, unix.F_SETPIPE_SZ, bigPipeSize); err != nil {
		fmt.Fprintf(os.Stderr, "growing the pipe: %v\n", err)
		return 1
	}
	if _, err := os.Stdout.Write(bigPattern()); err != nil {
		fmt.Fprintf(os.Stderr, "writing: %v\n", err)
		return 1
	}
	return 0
}

func bigPattern() []byte {
	b := make([]byte, bigPipeSize)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// TestExecutorDrainOwed: what the program wrote within the limit reaches
// the host whole even when its pipe still holds a mebibyte at its end and
// the host reads slowly, 4 KiB at a time: PID 1 relays what its pipes
// hold at the reap, however many steps that takes.
func TestExecutorDrainOwed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		time.Sleep(200 * time.Millisecond) // let the host's pipe fill
		for {
			n, err := r.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				got <- all
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	bin := sysinfoProgram(t)
	ops := []Op{
		{Code: Env, Strs: []string{bigPipeEnv + "=1"}},
		{Code: Drain, Ints: []uint64{4 << 20, 4 << 20}},
		{Code: Exec, Ints: []uint64{boxUID, boxGID}, Strs: []string{bin, "/", bin}},
	}
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	closeOurs := func(t *testing.T) {
		if err := w.Close(); err != nil {
			t.Errorf("closing the test's end of the host pipe: %v", err)
		}
	}
	st, _ := runExecutorWith(t, encode(t, &Plan{Ops: ops}), false, execOptions{attr: attr, stdout: w, after: closeOurs})
	if want := (Status{Kind: StatusRan, Op: 2}); st != want {
		t.Errorf("status %+v, want %+v", st, want)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, bigPattern()) {
			t.Errorf("the host got %d bytes, want the program's %d whole", len(b), bigPipeSize)
		}
	case <-time.After(time.Minute):
		t.Fatal("the host's pipe did not end within a minute")
	}
}
