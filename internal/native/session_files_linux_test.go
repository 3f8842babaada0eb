package native

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// streamFiles starts a native session over the stream transport with
// limits l and returns its files as the agent serves them (the path a
// Pod's files take) and as the host opens them, within lim.
func streamFiles(tb testing.TB, l spec.Limits, lim workspace.Limits) (*agent.Session, workspace.Files, workspace.Files) {
	tb.Helper()
	s := startSessionOver(tb, TransportStream, l)
	remote, err := s.RemoteFiles(lim)
	if err != nil {
		tb.Fatalf("RemoteFiles() = %v", err)
	}
	uid, gid := s.FileOwner()
	host, err := workspace.FromFile(s.Workspace(), "/workspace", uid, gid, lim)
	if err != nil {
		tb.Fatalf("FromFile() = %v", err)
	}
	tb.Cleanup(func() {
		for _, f := range []workspace.Files{remote, host} {
			if err := f.Close(); err != nil {
				tb.Errorf("Close() = %v", err)
			}
		}
	})
	return s, remote, host
}

// describe is what a test compares of an entry: everything but the
// time, with the owner named relative to the Files' own (the host sees
// the box's ids mapped).
func describe(f workspace.Files, e workspace.Entry) string {
	uid, gid := f.Owner()
	owner := func(id uint32, own int) string {
		if int(id) == own {
			return "user"
		}
		return fmt.Sprint(id)
	}
	return fmt.Sprintf("%s %s %s %d %v %s:%s %q", e.Name, e.Path, e.Type, e.Size, e.Mode, owner(e.UID, uid), owner(e.GID, gid), e.LinkTarget)
}

// sentinels names every workspace sentinel err matches.
func sentinels(err error) string {
	var names []string
	for _, s := range append(workspace.Sentinels(), fs.ErrPermission) {
		if errors.Is(err, s) {
			names = append(names, s.Error())
		}
	}
	return strings.Join(names, ",")
}

// fileCase is one file operation, run on the agent's side and on the
// host's after the same set-up.
type fileCase struct {
	name  string
	setup string // a script run in /workspace, emptied first
	op    func(f workspace.Files) (string, error)
	want  error // a sentinel the error matches, or nil for success
}

func stat(p string) func(workspace.Files) (string, error) {
	return func(f workspace.Files) (string, error) {
		e, err := f.Stat(p)
		return describe(f, e), err
	}
}

func read(p string) func(workspace.Files) (string, error) {
	return func(f workspace.Files) (string, error) {
		rc, e, err := f.Read(p)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		var b bytes.Buffer
		_, err = io.CopyN(&b, rc, e.Size)
		return describe(f, e) + " " + b.String(), err
	}
}

func list(p string) func(workspace.Files) (string, error) {
	return func(f workspace.Files) (string, error) {
		es, err := f.List(p)
		var out []string
		for _, e := range es {
			out = append(out, describe(f, e))
		}
		return strings.Join(out, "; "), err
	}
}

// then runs op and, whatever it returned, a listing of the workspace
// after it (what an operation left behind).
func then(op func(workspace.Files) (string, error)) func(workspace.Files) (string, error) {
	return func(f workspace.Files) (string, error) {
		got, err := op(f)
		after, lerr := list(".")(f)
		return got + " | " + after, errors.Join(err, lerr)
	}
}

func write(p, content string, mode fs.FileMode) func(workspace.Files) (string, error) {
	return then(func(f workspace.Files) (string, error) {
		e, err := f.Write(p, strings.NewReader(content), mode)
		return describe(f, e), err
	})
}

// errBodyFailed is the error of an upload's body that fails midway (the
// caller went away, its upload stalled or went over the limit).
var errBodyFailed = errors.New("the client went away")

// failedWrite writes p with a body that fails after some bytes: the
// write must leave p as it was, whatever arrived before the failure.
func failedWrite(p string) func(workspace.Files) (string, error) {
	return then(func(f workspace.Files) (string, error) {
		e, err := f.Write(p, io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errBodyFailed)), 0)
		return describe(f, e), err
	})
}

var fileCases = []fileCase{
	{"stat a file", "printf hello > f", stat("f"), nil},
	{"stat the workspace", "", stat("."), nil},
	{"stat a missing file", "", stat("nope"), workspace.ErrNotFound},
	{"stat a symbolic link", "ln -s /etc/passwd l", stat("l"), nil},
	{"stat through a symbolic link", "ln -s /etc d", stat("d/passwd"), workspace.ErrLink},
	{"stat a bad path", "", stat("../x"), workspace.ErrBadPath},
	{"stat below a closed directory", "mkdir d && : > d/f && chmod 0 d", stat("d/f"), workspace.ErrDenied},
	{"list", "mkdir d && echo a > d/f && ln -s x d/l && mkfifo d/p", list("d"), nil},
	{"list over the entry limit", "for i in 1 2 3 4 5; do : > $i; done", list("."), workspace.ErrTruncated},
	{"list a file", ": > f", list("f"), workspace.ErrNotDir},
	{"list names and link targets that are not UTF-8", `: > "$(head -c 200 /dev/zero | tr '\000' '\377')" && ln -s "$(head -c 1500 /dev/zero | tr '\000' '\376')" l`, list("."), nil},
	{"read", "printf hello > f", read("f"), nil},
	{"read an empty file", ": > f", read("f"), nil},
	{"read over the file limit", "head -c 2000 /dev/zero > big", read("big"), workspace.ErrTooLarge},
	{"read a FIFO", "mkfifo p", read("p"), workspace.ErrNotRegular},
	{"read a directory", "mkdir d", read("d"), workspace.ErrNotRegular},
	{"read a hard link", "echo x > f && ln f h", read("h"), workspace.ErrHardLink},
	{"read a symbolic link", "ln -s /etc/passwd l", read("l"), workspace.ErrLink},
	{"read unreadable", "echo x > f && chmod 0 f", read("f"), workspace.ErrDenied},
	{"write", "", write("n/new.txt", "data", 0o640), nil},
	{"write over a file", "echo old > f", write("f", "new", 0), nil},
	{"write at the file limit", "", write("f", strings.Repeat("x", 1000), 0), nil},
	{"write over the file limit leaves nothing", "", write("f", strings.Repeat("x", 1001), 0), workspace.ErrTooLarge},
	{"write with a failing body leaves the old file", "echo old > f", failedWrite("f"), errBodyFailed},
	{"write over a directory", "mkdir d", write("d", "x", 0), workspace.ErrIsDir},
	{"write through a symbolic link", "ln -s /tmp t", write("t/x", "x", 0), workspace.ErrLink},
	{"write a bad mode", "", write("f", "x", fs.ModeSetuid|0o755), workspace.ErrBadMode},
	{"mkdir", "", then(func(f workspace.Files) (string, error) { e, err := f.Mkdir("a/b/c"); return describe(f, e), err }), nil},
	{"mkdir over a file", ": > f", then(func(f workspace.Files) (string, error) { e, err := f.Mkdir("f"); return describe(f, e), err }), workspace.ErrExists},
	{"remove", ": > f", then(func(f workspace.Files) (string, error) { return "", f.Remove("f", false) }), nil},
	{"remove a full directory", "mkdir d && : > d/f", then(func(f workspace.Files) (string, error) { return "", f.Remove("d", false) }), workspace.ErrNotEmpty},
	{"remove recursively", "mkdir -p d/e && : > d/e/f && ln -s /etc d/l", then(func(f workspace.Files) (string, error) { return "", f.Remove("d", true) }), nil},
	{"remove the workspace", "", then(func(f workspace.Files) (string, error) { return "", f.Remove(".", true) }), workspace.ErrBadPath},
	{"rename", "echo x > a", then(func(f workspace.Files) (string, error) { e, err := f.Rename("a", "b/c"); return describe(f, e), err }), nil},
	{"rename a missing file", "", then(func(f workspace.Files) (string, error) { e, err := f.Rename("a", "b"); return describe(f, e), err }), workspace.ErrNotFound},
	{"rename a bad path", "", then(func(f workspace.Files) (string, error) { e, err := f.Rename("../a", "b"); return describe(f, e), err }), workspace.ErrBadPath},
}

// TestRemoteFiles runs every file operation through the agent over the
// stream and through the host's own Dir, after the same set-up: the
// answers, the errors' sentinels and messages must be the same.
func TestRemoteFiles(t *testing.T) {
	s, remote, host := streamFiles(t, spec.DefaultLimits, workspace.Limits{MaxFileBytes: 1000, MaxEntries: 3})
	if uid, gid := remote.Owner(); uid != 1000 || gid != 1000 {
		t.Errorf("remote Owner() = %d:%d, want the box's user, 1000:1000", uid, gid)
	}
	for _, c := range fileCases {
		t.Run(c.name, func(t *testing.T) {
			var got [2]string
			var errs [2]error
			for i, f := range []workspace.Files{remote, host} {
				if r := execSh(t, s, "cd /workspace && chmod -R u+rwx . && rm -rf ./* && "+orTrue(c.setup), 0); r.ExitCode != 0 {
					t.Fatalf("set-up %q: exit %d, %s", c.setup, r.ExitCode, r.Stderr)
				}
				got[i], errs[i] = c.op(f)
			}
			if (c.want == nil) != (errs[0] == nil) || (c.want != nil && !errors.Is(errs[0], c.want)) {
				t.Errorf("remote: %q, %v; want error %v", got[0], errs[0], c.want)
			}
			if got[0] != got[1] {
				t.Errorf("remote answered %q, the host %q", got[0], got[1])
			}
			// the agent's messages are the host's, marked as the box's
			if strings.ReplaceAll(fmt.Sprint(errs[0]), workspace.AgentPrefix, "") != fmt.Sprint(errs[1]) || sentinels(errs[0]) != sentinels(errs[1]) {
				t.Errorf("remote error %v [%s], the host's %v [%s]", errs[0], sentinels(errs[0]), errs[1], sentinels(errs[1]))
			}
		})
	}
	if _, err := remote.AddWatch(-1, ".", 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("remote AddWatch() = %v, want ErrUnsupported", err)
	}
	select {
	case <-s.Done():
		t.Errorf("the session ended: %v", s.Err())
	default:
	}
}

func orTrue(script string) string {
	if script == "" {
		return "true"
	}
	return script
}

// TestRemoteFilesFullDisk: a write that fills the box's own disk is
// ErrNoSpace through the agent too, and leaves nothing behind.
func TestRemoteFilesFullDisk(t *testing.T) {
	l := spec.DefaultLimits
	l.DiskBytes = 4 * spec.MiB
	_, remote, _ := streamFiles(t, l, workspace.Limits{})
	_, err := remote.Write("big", bytes.NewReader(make([]byte, 8<<20)), 0)
	if !errors.Is(err, workspace.ErrNoSpace) || !errors.Is(err, workspace.ErrTooLarge) {
		t.Errorf("Write(8 MiB) to a 4 MiB disk = %v, want ErrNoSpace and ErrTooLarge", err)
	}
	if es, err := remote.List("."); err != nil || len(es) != 0 {
		t.Errorf("List(.) after the failed write = %v, %v; want nothing left", es, err)
	}
}

// TestRemoteFilesAtOnce: more file calls at once than the stream has
// channels each end, or fail at once with ErrNoChannel, never hang; the
// channels come back, and the session serves on.
func TestRemoteFilesAtOnce(t *testing.T) {
	s, remote, _ := streamFiles(t, spec.DefaultLimits, workspace.Limits{})
	if _, err := remote.Write("f", strings.NewReader(strings.Repeat("x", 1<<20)), 0); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	const calls = 64
	errs := make(chan error, calls)
	for range calls {
		go func() { errs <- readErr(remote, "f") }()
	}
	var ok, full int
	for range calls {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, agent.ErrNoChannel):
			full++
		default:
			t.Errorf("a read among %d at once = %v, want success or ErrNoChannel", calls, err)
		}
	}
	t.Logf("%d reads at once: %d served, %d refused for want of a channel", calls, ok, full)
	if ok == 0 {
		t.Errorf("none of %d reads at once was served", calls)
	}
	if _, err := read("f")(remote); err != nil {
		t.Errorf("a read after the burst = %v, want the channels back", err)
	}
	if r := execSh(t, s, "echo alive", 0); r.Stdout != "alive\n" {
		t.Errorf("an exec after the burst = %q, want alive", r.Stdout)
	}
}

// readErr reads p whole and says how that went.
func readErr(f workspace.Files, p string) error {
	_, err := read(p)(f)
	return err
}
