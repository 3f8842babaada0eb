package workspace

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

func TestWriteReadRoundTrip(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		data := make([]byte, 1<<20)
		rand.Read(data)
		for i := range 256 {
			data[i] = byte(i)
		}
		ent, err := e.d.Write("/workspace/a/b/blob.bin", bytes.NewReader(data), 0o640)
		if err != nil {
			t.Fatal(err)
		}
		want := Entry{Name: "blob.bin", Path: "a/b/blob.bin", Type: TypeFile, Size: 1 << 20, Mode: 0o640, UID: uint32(e.uid), GID: uint32(e.gid)}
		ent.ModTime = time.Time{}
		if ent != want {
			t.Errorf("Write entry = %+v, want %+v", ent, want)
		}
		got, _, err := readAll(t, e.d, "a/b/blob.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Read after Write: %d bytes, %v; want the %d bytes written", len(got), err, len(data))
		}
		for _, p := range []string{"a", "a/b", "a/b/blob.bin"} {
			if uid, gid := owner(t, filepath.Join(e.ws, p)); uid != e.uid || gid != e.gid {
				t.Errorf("%s owned by %d:%d, want %d:%d", p, uid, gid, e.uid, e.gid)
			}
		}
		// Replacing keeps one file, with the new content and mode.
		if _, err := e.d.Write("a/b/blob.bin", strings.NewReader("new"), 0); err != nil {
			t.Fatal(err)
		}
		got, ent, err = readAll(t, e.d, "a/b/blob.bin")
		if err != nil || string(got) != "new" || ent.Mode != 0o644 {
			t.Errorf("Read after replacing = %q (mode %v), %v; want \"new\" (mode 0644)", got, ent.Mode, err)
		}
		checkNames(t, filepath.Join(e.ws, "a/b"), "blob.bin")
	})
}

func TestWriteErrors(t *testing.T) {
	forEachIdentity(t, Limits{MaxFileBytes: 1024}, func(t *testing.T, e *env) {
		writeFile(t, filepath.Join(e.ws, "file"), "x", 0o644)
		if err := os.Mkdir(filepath.Join(e.ws, "dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		e.give(t)
		tests := []struct {
			path string
			size int
			mode fs.FileMode
			want error
		}{
			{path: "exact", size: 1024},
			{path: "over", size: 1025, want: ErrTooLarge},
			{path: "dir", size: 1, want: ErrIsDir},
			{path: ".", size: 1, want: ErrIsDir},
			{path: "file/x", size: 1, want: ErrNotDir},
			{path: "setuid", size: 1, mode: 0o4755, want: ErrBadMode},
			{path: "../x", size: 1, want: ErrBadPath},
			{path: "/etc/x", size: 1, want: ErrBadPath},
		}
		for _, tt := range tests {
			_, err := e.d.Write(tt.path, bytes.NewReader(make([]byte, tt.size)), tt.mode)
			wantErr(t, "Write("+tt.path+")", err, tt.want)
		}
		// Nothing partial, no temporary file left behind.
		checkNames(t, e.ws, "dir", "exact", "file")
		checkNames(t, e.out)
	})
}

func TestReadErrors(t *testing.T) {
	forEachIdentity(t, Limits{MaxFileBytes: 4}, func(t *testing.T, e *env) {
		writeFile(t, filepath.Join(e.ws, "small"), "1234", 0o644)
		writeFile(t, filepath.Join(e.ws, "big"), "12345", 0o644)
		if err := os.Link(filepath.Join(e.ws, "small"), filepath.Join(e.ws, "second-name")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(e.ws, "dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		e.give(t)
		tests := []struct {
			path string
			want error
		}{
			{path: "big", want: ErrTooLarge},
			{path: "second-name", want: ErrHardLink},
			{path: "small", want: ErrHardLink},
			{path: "dir", want: ErrNotRegular},
			{path: ".", want: ErrIsDir},
			{path: "missing", want: ErrNotFound},
			{path: "big/x", want: ErrNotDir},
			{path: "x/../big", want: ErrBadPath},
		}
		for _, tt := range tests {
			_, _, err := readAll(t, e.d, tt.path)
			wantErr(t, "Read("+tt.path+")", err, tt.want)
		}
	})
}

func TestReadStopsAtOpenSize(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		rc := e.readGrown(t)
		got := new(bytes.Buffer)
		_, _ = got.ReadFrom(rc)
		if got.String() != "abc" {
			t.Errorf("Read of a file grown after open = %q, want %q", got, "abc")
		}
	})
}

func TestListAndStat(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		writeFile(t, filepath.Join(e.ws, "f"), "hello", 0o600)
		if err := os.Mkdir(filepath.Join(e.ws, "d"), 0o750); err != nil {
			t.Fatal(err)
		}
		symlink(t, "/etc/shadow", filepath.Join(e.ws, "evil"))
		e.give(t)
		got, err := e.d.List(".")
		if err != nil {
			t.Fatal(err)
		}
		uid, gid := uint32(e.uid), uint32(e.gid)
		want := []Entry{
			{Name: "d", Path: "d", Type: TypeDir, Mode: 0o750, UID: uid, GID: gid},
			{Name: "evil", Path: "evil", Type: TypeSymlink, Size: int64(len("/etc/shadow")), Mode: 0o777, LinkTarget: "/etc/shadow", UID: uid, GID: gid},
			{Name: "f", Path: "f", Type: TypeFile, Size: 5, Mode: 0o600, UID: uid, GID: gid},
		}
		if len(got) != len(want) {
			t.Fatalf("List(.) = %+v, want %+v", got, want)
		}
		for i := range got {
			if got[i].ModTime.IsZero() {
				t.Errorf("List(.)[%d].ModTime is zero", i)
			}
			got[i].ModTime = time.Time{}
			if got[i].Type == TypeDir {
				got[i].Size = 0
			}
			if got[i] != want[i] {
				t.Errorf("List(.)[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
		ent, err := e.d.Stat("evil")
		if err != nil || ent.Type != TypeSymlink || ent.LinkTarget != "/etc/shadow" {
			t.Errorf("Stat(evil) = %+v, %v; want the link itself", ent, err)
		}
		ent, err = e.d.Stat("/workspace")
		if err != nil || ent.Type != TypeDir || ent.Path != "." {
			t.Errorf("Stat(/workspace) = %+v, %v; want the workspace directory", ent, err)
		}
		stat := func(p string) error { _, err := e.d.Stat(p); return err }
		list := func(p string) error { _, err := e.d.List(p); return err }
		for _, tt := range []struct {
			name string
			call func(path string) error
			path string
			want error
		}{
			{"Stat", stat, "evil/x", ErrLink},
			{"Stat", stat, "f/x", ErrNotDir},
			{"Stat", stat, "missing", ErrNotFound},
			{"List", list, "evil", ErrLink},
			{"List", list, "f", ErrNotDir},
			{"List", list, "missing", ErrNotFound},
		} {
			wantErr(t, tt.name+"("+tt.path+")", tt.call(tt.path), tt.want)
		}
	})
}

func TestListTruncated(t *testing.T) {
	forEachIdentity(t, Limits{MaxEntries: 3}, func(t *testing.T, e *env) {
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			writeFile(t, filepath.Join(e.ws, name), "", 0o644)
		}
		e.give(t)
		got, err := e.d.List(".")
		wantErr(t, "List(.)", err, ErrTruncated)
		if len(got) != 3 {
			t.Errorf("List(.) with MaxEntries 3 = %d entries, want 3", len(got))
		}
	})
}

func TestMkdir(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		writeFile(t, filepath.Join(e.ws, "file"), "", 0o644)
		symlink(t, e.out, filepath.Join(e.ws, "link"))
		e.give(t)
		tests := []struct {
			path string
			want error
		}{
			{path: "a/b/c"},
			{path: "a/b"},
			{path: "."},
			{path: "file", want: ErrExists},
			{path: "file/x", want: ErrNotDir},
			{path: "link", want: ErrLink},
			{path: "link/x", want: ErrLink},
			{path: "/tmp/x", want: ErrBadPath},
		}
		for _, tt := range tests {
			ent, err := e.d.Mkdir(tt.path)
			wantErr(t, "Mkdir("+tt.path+")", err, tt.want)
			if err == nil && ent.Type != TypeDir {
				t.Errorf("Mkdir(%s) entry type = %q, want %q", tt.path, ent.Type, TypeDir)
			}
		}
		if uid, gid := owner(t, filepath.Join(e.ws, "a/b/c")); uid != e.uid || gid != e.gid {
			t.Errorf("a/b/c owned by %d:%d, want %d:%d", uid, gid, e.uid, e.gid)
		}
		checkNames(t, e.out)
	})
}

// TestMkdirMode: MkdirMode sets the bits of a directory it makes or
// finds, as the sandbox user, follows no link to do it, and refuses a
// mode that is not permission bits.
func TestMkdirMode(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		symlink(t, e.out, filepath.Join(e.ws, "link"))
		e.give(t)
		tests := []struct {
			path string
			mode fs.FileMode
			want error
		}{
			{path: "new/deep", mode: 0o750},
			{path: "new", mode: 0o705},
			{path: "open", mode: 0o777},
			{path: "link", mode: 0o777, want: ErrLink},
			{path: "setgid", mode: 0o775 | fs.ModeSetgid, want: ErrBadMode},
			{path: "sticky", mode: 0o777 | fs.ModeSticky, want: ErrBadMode},
			{path: "none", mode: 0, want: ErrBadMode},
		}
		for _, tt := range tests {
			_, err := e.d.MkdirMode(tt.path, tt.mode)
			wantErr(t, fmt.Sprintf("MkdirMode(%s, %v)", tt.path, tt.mode), err, tt.want)
			if err != nil {
				continue
			}
			fi, err := os.Stat(filepath.Join(e.ws, tt.path))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.mode {
				t.Errorf("MkdirMode(%s, %v) left mode %v", tt.path, tt.mode, got)
			}
		}
		checkNames(t, e.out)
	})
}

func TestRemove(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		outFile := newDecoy(t, filepath.Join(e.out, "keep"), 0o666)
		e.mkdirs(t, "tree/a/b", "empty", "full")
		writeFile(t, filepath.Join(e.ws, "tree/a/b/f"), "x", 0o644)
		writeFile(t, filepath.Join(e.ws, "full/f"), "x", 0o644)
		writeFile(t, filepath.Join(e.ws, "file"), "x", 0o644)
		symlink(t, e.out, filepath.Join(e.ws, "tree/a/out"))
		symlink(t, e.out, filepath.Join(e.ws, "outlink"))
		e.give(t)
		tests := []struct {
			path      string
			recursive bool
			want      error
		}{
			{path: "full", want: ErrNotEmpty},
			{path: "tree", want: ErrNotEmpty},
			{path: "empty"},
			{path: "file"},
			{path: "outlink/keep", recursive: true, want: ErrLink},
			{path: "outlink", recursive: true},
			{path: "tree", recursive: true},
			{path: "missing", want: ErrNotFound},
			{path: ".", recursive: true, want: ErrBadPath},
			{path: "/workspace", recursive: true, want: ErrBadPath},
		}
		for _, tt := range tests {
			err := e.d.Remove(tt.path, tt.recursive)
			wantErr(t, "Remove("+tt.path+")", err, tt.want)
		}
		checkNames(t, e.ws, "full")
		checkNames(t, e.out, "keep")
		outFile.check(t)
	})
}

func TestRemoveDeepTree(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		dir := e.ws
		for range maxRemoveDepth + 1 {
			dir = filepath.Join(dir, "d")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		e.give(t)
		err := e.d.Remove("d", true)
		wantErr(t, "Remove of a tree deeper than the limit", err, ErrTooLarge)
	})
}

// hostGroup is a supplementary group of the host process that the
// sandbox user must not inherit.
const hostGroup = 4343

func TestPermissionsOfTheSandboxUser(t *testing.T) {
	testhost.RequireRoot(t)
	e := newEnv(t, sandboxID, sandboxID, Limits{})
	// Only root may read these: the first by owner, the second by a
	// group that the host process has (for this test) and the sandbox
	// user does not.
	writeFile(t, filepath.Join(e.ws, "root-only"), "secret", 0o600)
	writeFile(t, filepath.Join(e.ws, "root-group"), "secret", 0o640)
	chmod(t, filepath.Join(e.ws, "root-group"), 0o640)
	if err := os.Chown(filepath.Join(e.ws, "root-group"), 0, hostGroup); err != nil {
		t.Fatal(err)
	}
	groups, err := syscall.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgroups([]int{hostGroup}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Setgroups(groups); err != nil {
			t.Errorf("restoring the supplementary groups: %v", err)
		}
	})
	if err := os.Mkdir(filepath.Join(e.ws, "root-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.ws, "locked"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.ws, "locked/f"), "secret", 0o644)
	for _, p := range []string{"root-only", "root-group", "locked/f"} {
		got, _, err := readAll(t, e.d, p)
		wantErr(t, "Read("+p+") as uid 4242", err, fs.ErrPermission)
		wantErr(t, "Read("+p+") as uid 4242", err, ErrDenied)
		if len(got) != 0 {
			t.Errorf("Read(%s) as uid 4242 returned %q", p, got)
		}
	}
	_, err = e.d.Write("root-dir/x", strings.NewReader("x"), 0)
	wantErr(t, "Write into a root-owned directory as uid 4242", err, fs.ErrPermission)
	wantErr(t, "Write into a root-owned directory as uid 4242", err, ErrDenied)
	_, err = e.d.List("locked")
	wantErr(t, "List of a root-only directory as uid 4242", err, fs.ErrPermission)
	wantErr(t, "List of a root-only directory as uid 4242", err, ErrDenied)
	err = e.d.Remove("locked", true)
	wantErr(t, "Remove of a root-only directory as uid 4242", err, fs.ErrPermission)
	wantErr(t, "Remove of a root-only directory as uid 4242", err, ErrDenied)
	checkNames(t, filepath.Join(e.ws, "root-dir"))
	checkNames(t, filepath.Join(e.ws, "locked"), "f")
}

func TestOpenErrors(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	writeFile(t, file, "", 0o644)
	symlink(t, base, filepath.Join(base, "link"))
	for _, dir := range []string{file, filepath.Join(base, "link"), filepath.Join(base, "missing")} {
		if d, err := Open(dir, os.Geteuid(), os.Getegid(), Limits{}); err == nil {
			d.Close()
			t.Errorf("Open(%s) succeeded, want an error", dir)
		}
	}
	d, err := Open(base, os.Geteuid(), os.Getegid(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = d.Stat(".")
	wantErr(t, "Stat after Close", err, os.ErrClosed)
}

func TestReadOnlyWorkspace(t *testing.T) {
	e := newEnv(t, os.Geteuid(), os.Getegid(), Limits{ReadOnly: true})
	if err := os.WriteFile(filepath.Join(e.ws, "kept.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	changes := map[string]func() error{
		"Write":  func() error { _, err := e.d.Write("new.txt", strings.NewReader("x"), 0); return err },
		"Mkdir":  func() error { _, err := e.d.Mkdir("dir"); return err },
		"Remove": func() error { return e.d.Remove("kept.txt", false) },
	}
	for name, change := range changes {
		if err := change(); !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s() on a read-only workspace = %v, want ErrReadOnly", name, err)
		}
	}
	rc, _, err := e.d.Read("kept.txt")
	if err != nil {
		t.Fatalf("Read() on a read-only workspace = %v", err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "kept" {
		t.Errorf("Read() = %q, want the file", b)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "kept.txt")); err != nil {
		t.Errorf("the file is gone after a refused Remove: %v", err)
	}
}

// TestListOutlandishTimes: a sandbox may set any mtime on its files, and
// its workspace is a tmpfs, which keeps times far past the years JSON can
// carry. Listing and stat must still describe them in a form every caller
// can encode, clamped to the nearest time that is.
func TestListOutlandishTimes(t *testing.T) {
	tests := []struct {
		name string
		sec  int64
		want time.Time
	}{
		{"year 10001", 253433923200, maxModTime},
		{"largest time", 1<<63 - 1, maxModTime},
		{"before year 0", -62198755200, minModTime},
		{"ordinary", 1700000000, time.Unix(1700000000, 0)},
	}
	ws := testhost.Tmpfs(t, "1m")
	for _, tt := range tests {
		p := filepath.Join(ws, tt.name)
		writeFile(t, p, "x", 0o600)
		ts := []unix.Timespec{{Sec: tt.sec}, {Sec: tt.sec}}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
			t.Fatalf("setting an mtime of %d s: %v", tt.sec, err)
		}
	}
	d, err := Open(ws, os.Geteuid(), os.Getegid(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	list, err := d.List(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		st, err := d.Stat(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range append([]Entry{st}, list...) {
			if got.Name != tt.name {
				continue
			}
			if !got.ModTime.Equal(tt.want) {
				t.Errorf("%s: mtime %v, want %v", tt.name, got.ModTime, tt.want)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("%s: the entry cannot be encoded: %v", tt.name, err)
			}
		}
	}
}
