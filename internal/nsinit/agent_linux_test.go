package nsinit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// socketpair is a connected pair of stream sockets, closed at the test's
// end: [0] the host's end, [1] the agent's.
func socketpair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds
}

// sendWithFiles sends frame in one sendmsg with n descriptors of
// /dev/null attached, as the host sends a request.
func sendWithFiles(t *testing.T, fd int, frame []byte, n int) {
	t.Helper()
	var fds []int
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds = append(fds, int(f.Fd()))
	}
	var rights []byte
	if n > 0 {
		rights = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, frame, rights, nil, 0); err != nil {
		t.Fatalf("sendmsg: %v", err)
	}
}

// openFDs counts this process's open descriptors, to catch a leak.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestReadRequest: a request read by the agent is the one the host
// encoded, with its descriptors; a request the agent cannot read is an
// error that closes whatever descriptors came with it.
func TestReadRequest(t *testing.T) {
	spawnReq := Request{Op: OpSpawn, ID: 7, Argv: []string{"ls", "-l"}, Env: []string{"A=b"}, Dir: "/tmp", Files: 3}
	good, err := EncodeRequest(spawnReq)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(body string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	tests := []struct {
		name    string
		frame   []byte
		files   int
		hangUp  bool
		want    Request
		wantErr string
	}{
		{"spawn with its files", good, 3, false, spawnReq, ""},
		{"kill without files", frame(`{"op":"kill","id":3,"signal":9}`), 0, false, Request{Op: OpKill, ID: 3, Signal: 9}, ""},
		{"host hung up", nil, 0, true, Request{}, "EOF"},
		{"unknown field", frame(`{"op":"spawn","id":1,"uid":0}`), 2, false, Request{}, `unknown field "uid"`},
		{"not JSON", frame(`spawn`), 1, false, Request{}, "invalid character"},
		{"too large", binary.BigEndian.AppendUint32(nil, maxConfig+1), 2, false, Request{}, "larger than"},
		{"cut short", frame(`{"op":"spawn"}`)[:8], 1, true, Request{}, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pair := socketpair(t)
			before := openFDs(t)
			if len(tt.frame) > 0 {
				sendWithFiles(t, pair[0], tt.frame, tt.files)
			}
			if tt.hangUp {
				if err := unix.Shutdown(pair[0], unix.SHUT_WR); err != nil {
					t.Fatal(err)
				}
			}
			got, fds, err := readRequest(pair[1])
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("readRequest() = %+v, %v, want an error containing %q", got, err, tt.wantErr)
				}
				if fds != nil {
					t.Errorf("readRequest() returned descriptors %v with its error", fds)
				}
			} else {
				if err != nil || !slices.Equal(got.Argv, tt.want.Argv) || got.Op != tt.want.Op || got.ID != tt.want.ID || got.Signal != tt.want.Signal || got.Dir != tt.want.Dir {
					t.Errorf("readRequest() = %+v, %v, want %+v", got, err, tt.want)
				}
				if len(fds) != tt.files {
					t.Errorf("readRequest() gave %d descriptors, want %d", len(fds), tt.files)
				}
				closeAll(fds)
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after the request, %d before: a leak", after, before)
			}
		})
	}
}

// TestEncodeRequestBoundsDescriptors: a request never promises more
// descriptors than the agent's receive buffer holds.
func TestEncodeRequestBoundsDescriptors(t *testing.T) {
	tests := []struct {
		files, cgroup int
		wantErr       bool
	}{
		{3, 0, false}, {3, 13, false}, {MaxRequestFDs, 0, false}, {3, 14, true}, {MaxRequestFDs + 1, 0, true},
	}
	for _, tt := range tests {
		_, err := EncodeRequest(Request{Op: OpSpawn, Files: tt.files, Cgroup: tt.cgroup})
		if (err != nil) != tt.wantErr {
			t.Errorf("EncodeRequest(%d files, %d cgroup) = %v, want error %v", tt.files, tt.cgroup, err, tt.wantErr)
		}
	}
}

// TestArgvRoles: which argv makes the warden binary the init, or asks it
// its protocol version; nothing else does.
func TestArgvRoles(t *testing.T) {
	tests := []struct {
		argv          []string
		init, isProbe bool
	}{
		{nil, false, false},
		{[]string{"warden", "run"}, false, false},
		{[]string{Arg0}, true, false},
		{[]string{BoxedPath, BoxedStdin}, true, false},
		{[]string{Arg0, ProbeArg}, true, true},
		{[]string{BoxedPath, ProbeArg}, true, false},
		{[]string{Arg0, ProbeArg, "x"}, true, false},
		{[]string{"/usr/bin/warden-init"}, false, false},
	}
	for _, tt := range tests {
		if got := IsInit(tt.argv); got != tt.init {
			t.Errorf("IsInit(%q) = %v, want %v", tt.argv, got, tt.init)
		}
		if got := IsProbe(tt.argv); got != tt.isProbe {
			t.Errorf("IsProbe(%q) = %v, want %v", tt.argv, got, tt.isProbe)
		}
	}
}

// TestStatusOf: a wait status becomes the exit code a shell would give.
func TestStatusOf(t *testing.T) {
	tests := []struct {
		ws   unix.WaitStatus
		want Status
	}{
		{0, Status{}},
		{3 << 8, Status{ExitCode: 3}},
		{255 << 8, Status{ExitCode: 255}},
		{unix.WaitStatus(unix.SIGKILL), Status{ExitCode: 137, Signal: 9}},
		{unix.WaitStatus(unix.SIGSEGV) | 0x80, Status{ExitCode: 139, Signal: 11}}, // with a core dump
	}
	for _, tt := range tests {
		if got := statusOf(tt.ws); got != tt.want {
			t.Errorf("statusOf(%#x) = %+v, want %+v", uint32(tt.ws), got, tt.want)
		}
	}
}

// TestMalformedSpawn: a spawn whose descriptors do not add up is
// answered with a start failure, and its descriptors are closed, before
// anything is forked. The program named does not exist, so even a broken
// check forks nothing on the host.
func TestMalformedSpawn(t *testing.T) {
	ls := []string{"/nonexistent/warden-test-program"}
	tests := []struct {
		name string
		req  Request
		fds  int
		want string
	}{
		{"fewer files than promised", Request{Op: OpSpawn, ID: 1, Argv: ls, Files: 3}, 2, "open-files limit"},
		{"more files than promised", Request{Op: OpSpawn, ID: 2, Argv: ls, Files: 3}, 4, "malformed spawn request"},
		{"no stderr", Request{Op: OpSpawn, ID: 3, Argv: ls, Files: 2}, 2, "malformed spawn request"},
		{"odd cgroup files", Request{Op: OpSpawn, ID: 4, Argv: ls, Files: 3, Cgroup: 1}, 4, "malformed spawn request"},
		{"no argv", Request{Op: OpSpawn, ID: 5, Files: 3}, 3, "malformed spawn request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := openFDs(t)
			var fds []int
			for range tt.fds {
				fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				fds = append(fds, fd)
			}
			var out bytes.Buffer
			a := &agent{enc: json.NewEncoder(&out), running: map[int]uint64{}, pgids: map[uint64]int{}, sweep: map[uint64]bool{}}
			a.spawn(spawnJob{tt.req, fds})
			var e Event
			if err := json.Unmarshal(out.Bytes(), &e); err != nil {
				t.Fatalf("the agent answered %q: %v", out.String(), err)
			}
			if e.Kind != EventExited || e.ID != tt.req.ID || e.Status == nil || !e.Status.StartFailed || e.Status.ExitCode != 126 || !strings.Contains(e.Status.Error, tt.want) {
				t.Errorf("the agent answered %q, want a start failure (126) of process %d saying %q", out.String(), tt.req.ID, tt.want)
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after the spawn, %d before: its descriptors leaked", after, before)
			}
			if len(a.running) != 0 {
				t.Errorf("the agent records %v as running", a.running)
			}
		})
	}
}

// TestLookPathIn: a command is found on the PATH the program gets, or in
// its working directory when named with a slash; what is missing or not
// executable gets the exit code's reason.
func TestLookPathIn(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tool := write("tool", 0o755)
	plain := write("plain", 0o644)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + sub + ":" + dir
	tests := []struct {
		name, cmd string
		env       []string
		want      string
		wantErr   string
	}{
		{"on PATH", "tool", []string{path}, tool, ""},
		{"last PATH wins", "tool", []string{"PATH=/nonexistent", path}, tool, ""},
		{"default PATH", "tool", nil, "", "not found in the sandbox (PATH=/usr/bin:/bin)"},
		{"a directory is skipped", "sub", []string{path}, "", "not found"},
		{"not executable is skipped", "plain", []string{path}, "", "not found"},
		{"absolute", tool, nil, tool, ""},
		{"relative to the working directory", "./tool", nil, tool, ""},
		{"absolute, not executable", plain, nil, "", errNotExecutable.Error()},
		{"absolute directory", sub, nil, "", errNotExecutable.Error()},
		{"absolute, missing", filepath.Join(dir, "gone"), nil, "", "not found in the sandbox"},
	}
	for _, tt := range tests {
		got, err := lookPathIn(tt.cmd, tt.env, dir, seenRoot(&Config{}))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: lookPathIn(%q) = %q, %v, want an error containing %q", tt.name, tt.cmd, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: lookPathIn(%q) = %q, %v, want %q", tt.name, tt.cmd, got, err, tt.want)
		}
	}
	// A template's sandbox does not see the host's /usr: its error says so.
	for _, tt := range []struct {
		cfg       Config
		want, not string
	}{
		{Config{}, "the host's /usr", "template"},
		{Config{Root: "/store/tree"}, "its template's tree", "host"},
	} {
		_, err := lookPathIn("gone", nil, dir, seenRoot(&tt.cfg))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tt.not) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Root %q: lookPathIn(gone) = %v, want one line with %q and without %q", tt.cfg.Root, err, tt.want, tt.not)
		}
	}
}

// TestStatOf reads this process's parent from /proc, as the orphan sweep
// does, and a child's whose command has spaces and parentheses that
// mimic the fields after it (a program may choose its name, and the
// sweep must not take its "Z 1" for a zombie of pid 1's).
func TestStatOf(t *testing.T) {
	ppid, zombie, ok := statOf(os.Getpid())
	if !ok || zombie || ppid != os.Getppid() {
		t.Errorf("statOf(self) = %d, %v, %v, want %d, false, true", ppid, zombie, ok, os.Getppid())
	}
	if _, _, ok := statOf(-1); ok {
		t.Errorf("statOf(-1) found a process")
	}
	const comm = "a) Z 1 2 (b"
	link := filepath.Join(t.TempDir(), comm)
	if err := os.Symlink("/bin/sleep", link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "60") // bounded: killed below, and sleep ends by itself
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", link, err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil {
			t.Logf("killing the sleep: %v", err)
		}
		if err := cmd.Wait(); err == nil {
			t.Logf("the sleep ended before it was killed")
		}
	})
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil || !strings.Contains(string(stat), "("+comm+")") {
		t.Fatalf("the child's stat = %q, %v, want its command %q in it", stat, err, comm)
	}
	ppid, zombie, ok = statOf(cmd.Process.Pid)
	if !ok || zombie || ppid != os.Getpid() {
		t.Errorf("statOf(child named %q) = %d, %v, %v, want %d, false, true", comm, ppid, zombie, ok, os.Getpid())
	}
}

// TestLockdownErrorUnwraps: a lockdown failure keeps its cause.
func TestLockdownErrorUnwraps(t *testing.T) {
	if err := (lockdownError{io.ErrClosedPipe}); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("lockdownError does not unwrap to its cause")
	}
}

func TestSpawnShape(t *testing.T) {
	ok := Request{Argv: []string{"true"}, Files: 3, Cgroup: 2}
	tests := []struct {
		name string
		req  Request
		got  int
		want string
	}{
		{"whole", ok, 5, ""},
		{"truncated by a full table", ok, 3, "open-files limit"},
		{"more than named", ok, 6, "malformed"},
		{"too few files named", Request{Argv: []string{"true"}, Files: 2}, 2, "malformed"},
		{"odd cgroup files", Request{Argv: []string{"true"}, Files: 3, Cgroup: 1}, 4, "malformed"},
		{"no argv", Request{Files: 3}, 3, "malformed"},
		{"streams on the fd path", Request{Argv: []string{"true"}, Files: 3, Streams: []Stream{{}}}, 3, "malformed"},
	}
	for _, tt := range tests {
		err := spawnShape(tt.req, tt.got)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: spawnShape() = %v, want %q", tt.name, err, tt.want)
		}
	}
}
