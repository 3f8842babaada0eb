package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fspb "github.com/warden-sandbox/warden/internal/e2b/filesystempb"
)

func TestFSStat(t *testing.T) {
	h := newFSHarness(t)
	secret, check := h.decoy(t)
	h.plant(t, map[string]string{
		"f.txt":      "test",
		"d/":         "/",
		"rel-link":   "->f.txt",
		"abs-link":   "->/workspace/d",
		"evil":       "->" + secret,
		"evil-dir":   "->" + h.out,
		"d/up-link":  "->../f.txt",
		"d/deep.txt": "x",
	})
	str := func(s string) *string { return &s }
	tests := []struct {
		path, user string
		code       connect.Code
		want       *fspb.EntryInfo // the fields compared; nil: any
		msg        string          // in the error
	}{
		{path: "f.txt", want: &fspb.EntryInfo{Name: "f.txt", Type: fspb.FileType_FILE_TYPE_FILE, Path: "/home/user/f.txt", Size: 4, Mode: 0o644, Permissions: "-rw-r--r--", Owner: "user", Group: "user"}},
		{path: "/home/user/d", want: &fspb.EntryInfo{Name: "d", Type: fspb.FileType_FILE_TYPE_DIRECTORY, Path: "/home/user/d", Mode: 0o755, Permissions: "drwxr-xr-x", Owner: "user", Group: "user"}},
		{path: "/workspace/d/deep.txt", want: &fspb.EntryInfo{Name: "deep.txt", Type: fspb.FileType_FILE_TYPE_FILE, Path: "/home/user/d/deep.txt", Size: 1, Mode: 0o644, Permissions: "-rw-r--r--", Owner: "user", Group: "user"}},
		{path: "", want: &fspb.EntryInfo{Name: "user", Type: fspb.FileType_FILE_TYPE_DIRECTORY, Path: "/home/user", Mode: 0o755, Permissions: "drwxr-xr-x", Owner: "user", Group: "user"}},
		{path: "rel-link", want: &fspb.EntryInfo{Name: "rel-link", Type: fspb.FileType_FILE_TYPE_SYMLINK, Path: "/home/user/rel-link", Size: 5, Mode: 0o777, Permissions: "Lrwxrwxrwx", Owner: "user", Group: "user", SymlinkTarget: str("/home/user/f.txt")}},
		{path: "abs-link", want: &fspb.EntryInfo{Name: "abs-link", Type: fspb.FileType_FILE_TYPE_SYMLINK, Path: "/home/user/abs-link", Size: 12, Mode: 0o777, Permissions: "Lrwxrwxrwx", Owner: "user", Group: "user", SymlinkTarget: str("/home/user/d")}},
		{path: "d/up-link", want: &fspb.EntryInfo{Name: "up-link", Type: fspb.FileType_FILE_TYPE_SYMLINK, Path: "/home/user/d/up-link", Size: 8, Mode: 0o777, Permissions: "Lrwxrwxrwx", Owner: "user", Group: "user", SymlinkTarget: str("/home/user/f.txt")}},
		{path: "evil", want: &fspb.EntryInfo{Name: "evil", Type: fspb.FileType_FILE_TYPE_SYMLINK, Path: "/home/user/evil", Size: int64(len(secret)), Mode: 0o777, Permissions: "Lrwxrwxrwx", Owner: "user", Group: "user", SymlinkTarget: str(secret)}},
		{path: "evil-dir/secret", code: connect.CodeInvalidArgument, msg: "symbolic link"},
		{path: "missing", code: connect.CodeNotFound},
		{path: "f.txt/x", code: connect.CodeInvalidArgument},
		{path: "/etc/passwd", code: connect.CodeInvalidArgument, msg: "/home/user"},
		{path: "/home/user/../../etc/passwd", code: connect.CodeInvalidArgument, msg: "outside"},
		{path: "../out/secret", code: connect.CodeInvalidArgument, msg: "outside"},
		{path: "a\x00b", code: connect.CodeInvalidArgument, msg: "NUL"},
		{path: strings.Repeat("a", 5000), code: connect.CodeInvalidArgument},
		{path: "f.txt", user: "root", code: connect.CodeInvalidArgument, msg: `"user"`},
		{path: "f.txt", user: "user", want: &fspb.EntryInfo{Name: "f.txt", Type: fspb.FileType_FILE_TYPE_FILE, Path: "/home/user/f.txt", Size: 4, Mode: 0o644, Permissions: "-rw-r--r--", Owner: "user", Group: "user"}},
	}
	for _, tt := range tests {
		req := connect.NewRequest(&fspb.StatRequest{Path: tt.path})
		if tt.user != "" {
			asUser(req, tt.user)
		}
		res, err := h.fs.Stat(context.Background(), req)
		what := fmt.Sprintf("Stat(%.40q as %q)", tt.path, tt.user)
		wantCode(t, what, err, tt.code)
		if err != nil {
			if !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %q does not name %q on one line", what, err, tt.msg)
			}
			continue
		}
		got := res.Msg.GetEntry()
		if got.GetModifiedTime() == nil {
			t.Errorf("%s: no modified time", what)
		}
		got.ModifiedTime = nil
		if tt.want.Type == fspb.FileType_FILE_TYPE_DIRECTORY {
			got.Size = 0
		}
		if got.String() != tt.want.String() {
			t.Errorf("%s:\n got %v\nwant %v", what, got, tt.want)
		}
	}
	check()
}

func TestFSMakeDir(t *testing.T) {
	h := newFSHarness(t)
	_, check := h.decoy(t)
	h.plant(t, map[string]string{"file": "x", "d/": "/", "outlink": "->" + h.out})
	tests := []struct {
		path string
		code connect.Code
	}{
		{path: "new/nested/dir"},
		{path: "/home/user/new2"},
		{path: "d", code: connect.CodeAlreadyExists},
		{path: "new/nested/dir", code: connect.CodeAlreadyExists},
		{path: "file", code: connect.CodeInvalidArgument},
		{path: "file/sub", code: connect.CodeInvalidArgument},
		{path: "outlink/planted", code: connect.CodeInvalidArgument},
		{path: "/tmp/x", code: connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		res, err := h.fs.MakeDir(context.Background(), connect.NewRequest(&fspb.MakeDirRequest{Path: tt.path}))
		wantCode(t, "MakeDir("+tt.path+")", err, tt.code)
		if err == nil && res.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY {
			t.Errorf("MakeDir(%s) entry %v, want a directory", tt.path, res.Msg.GetEntry())
		}
	}
	if fi, err := os.Stat(filepath.Join(h.ws, "new/nested/dir")); err != nil || !fi.IsDir() {
		t.Errorf("new/nested/dir not made: %v", err)
	}
	check()
}

func TestFSMove(t *testing.T) {
	h := newFSHarness(t)
	secret, check := h.decoy(t)
	h.plant(t, map[string]string{"a.txt": "A", "b.txt": "B", "outlink": "->" + h.out, "evil": "->" + secret})
	tests := []struct {
		src, dst string
		code     connect.Code
		wantPath string
	}{
		{src: "a.txt", dst: "sub/dir/a2.txt", wantPath: "/home/user/sub/dir/a2.txt"},
		{src: "/home/user/sub/dir/a2.txt", dst: "/workspace/a3.txt", wantPath: "/home/user/a3.txt"},
		{src: "b.txt", dst: "evil", wantPath: "/home/user/evil"}, // replaces the link, not its target
		{src: "missing", dst: "x", code: connect.CodeNotFound},
		{src: "outlink/secret", dst: "stolen", code: connect.CodeInvalidArgument},
		{src: "a3.txt", dst: "outlink/planted", code: connect.CodeInvalidArgument},
		{src: "a3.txt", dst: "/etc/planted", code: connect.CodeInvalidArgument},
		{src: "/etc/passwd", dst: "x", code: connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		res, err := h.fs.Move(context.Background(), connect.NewRequest(&fspb.MoveRequest{Source: tt.src, Destination: tt.dst}))
		wantCode(t, "Move("+tt.src+", "+tt.dst+")", err, tt.code)
		if err == nil && res.Msg.GetEntry().GetPath() != tt.wantPath {
			t.Errorf("Move(%s, %s) entry path %q, want %q", tt.src, tt.dst, res.Msg.GetEntry().GetPath(), tt.wantPath)
		}
	}
	if got, err := os.ReadFile(filepath.Join(h.ws, "evil")); err != nil || string(got) != "B" {
		t.Errorf("evil holds %q, %v; want the moved file", got, err)
	}
	check()
}

func TestFSRemove(t *testing.T) {
	h := newFSHarness(t)
	_, check := h.decoy(t)
	h.plant(t, map[string]string{"f": "x", "tree/a/b/c": "x", "tree/out": "->" + h.out, "outlink": "->" + h.out})
	tests := []struct {
		path string
		code connect.Code
	}{
		{path: "f"},
		{path: "missing"}, // envd's RemoveAll: nothing to remove is fine
		{path: "tree"},
		{path: "outlink/secret", code: connect.CodeInvalidArgument},
		{path: "outlink"},
		{path: "/home/user", code: connect.CodeInvalidArgument},
		{path: "/etc", code: connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		_, err := h.fs.Remove(context.Background(), connect.NewRequest(&fspb.RemoveRequest{Path: tt.path}))
		wantCode(t, "Remove("+tt.path+")", err, tt.code)
	}
	if ents, err := os.ReadDir(h.ws); err != nil || len(ents) != 0 {
		t.Errorf("workspace holds %d entries (%v), want none", len(ents), err)
	}
	check()
}

func TestFSListDir(t *testing.T) {
	h := newFSHarness(t)
	_, check := h.decoy(t)
	h.plant(t, map[string]string{
		"t/file1.txt":            "Hello, world!",
		"t/subdir1/subdir1_1/":   "/",
		"t/subdir1/subdir1_2/":   "/",
		"t/subdir2/subdir2_1/x/": "/",
		"t/subdir2/subdir2_2/":   "/",
		"t/out":                  "->" + h.out,
		"big/":                   "/",
	})
	tests := []struct {
		path  string
		depth uint32
		code  connect.Code
		want  []string // paths relative to /home/user/t
	}{
		{path: "t", want: []string{"file1.txt", "out", "subdir1", "subdir2"}},
		{path: "/home/user/t", depth: 1, want: []string{"file1.txt", "out", "subdir1", "subdir2"}},
		{path: "t", depth: 2, want: []string{"file1.txt", "out", "subdir1", "subdir1/subdir1_1", "subdir1/subdir1_2", "subdir2", "subdir2/subdir2_1", "subdir2/subdir2_2"}},
		{path: "t", depth: 9, want: []string{"file1.txt", "out", "subdir1", "subdir1/subdir1_1", "subdir1/subdir1_2", "subdir2", "subdir2/subdir2_1", "subdir2/subdir2_1/x", "subdir2/subdir2_2"}},
		{path: "t", depth: maxListDepth + 1, code: connect.CodeInvalidArgument},
		{path: "t/out", code: connect.CodeInvalidArgument},
		{path: "t/file1.txt", code: connect.CodeInvalidArgument},
		{path: "missing", code: connect.CodeNotFound},
		{path: "/etc", code: connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		res, err := h.fs.ListDir(context.Background(), connect.NewRequest(&fspb.ListDirRequest{Path: tt.path, Depth: tt.depth}))
		what := fmt.Sprintf("ListDir(%s, %d)", tt.path, tt.depth)
		wantCode(t, what, err, tt.code)
		if err != nil {
			continue
		}
		var got []string
		for _, e := range res.Msg.GetEntries() {
			got = append(got, strings.TrimPrefix(e.GetPath(), "/home/user/t/"))
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s = %q, want %q", what, got, tt.want)
		}
	}
	// Past the entry bound the call fails, naming the bound.
	for i := range maxListEntries + 1 {
		if err := os.WriteFile(filepath.Join(h.ws, "big", fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.fs.ListDir(context.Background(), connect.NewRequest(&fspb.ListDirRequest{Path: "/home/user"}))
	wantCode(t, "ListDir of a tree over the entry bound", err, 0)
	_, err = h.fs.ListDir(context.Background(), connect.NewRequest(&fspb.ListDirRequest{Path: "/home/user", Depth: 2}))
	wantCode(t, "ListDir of a tree over the entry bound", err, connect.CodeFailedPrecondition)
	if err != nil && !strings.Contains(err.Error(), fmt.Sprint(maxListEntries)) {
		t.Errorf("ListDir over the bound: error %q does not name the bound %d", err, maxListEntries)
	}
	check()
}

// TestFSSandboxGone: a sandbox that ended answers the Manager's error, and
// another sandbox's calls never reach this one's workspace.
func TestFSSandboxGone(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"f": "x"})
	req := connect.NewRequest(&fspb.StatRequest{Path: "f"})
	req.Header().Set("X-Test-Sandbox", "sbx-bob")
	_, err := h.fs.Stat(context.Background(), req)
	wantCode(t, "Stat from another sandbox", err, connect.CodeNotFound)
	h.sess.gone = true
	_, err = h.fs.Stat(context.Background(), connect.NewRequest(&fspb.StatRequest{Path: "f"}))
	wantCode(t, "Stat in an ended sandbox", err, connect.CodeNotFound)
}

// TestFSUnknownProcedure: a procedure the service lacks gets a Connect
// error naming it, not a bare 404 page.
func TestFSUnknownProcedure(t *testing.T) {
	h := newFSHarness(t)
	res, err := h.srv.Client().Post(h.srv.URL+"/filesystem.Filesystem/Chmod", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct{ Code, Message string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 404 || body.Code != "unimplemented" || !strings.Contains(body.Message, "Chmod") {
		t.Errorf("unknown procedure: status %d, body %+v (%v); want 404 unimplemented naming Chmod", res.StatusCode, body, err)
	}
}

// TestFSBadMessages: a malformed or oversized request gets a Connect
// error, and the service keeps answering.
func TestFSBadMessages(t *testing.T) {
	h := newFSHarness(t)
	for _, tt := range []struct {
		name, body string
		code       string
	}{
		{name: "malformed JSON", body: `{"path":`, code: "invalid_argument"},
		{name: "wrong field type", body: `{"path":7}`, code: "invalid_argument"},
		{name: "oversized", body: `{"path":"` + strings.Repeat("a", maxFSMessageBytes) + `"}`, code: "resource_exhausted"},
	} {
		res, err := h.srv.Client().Post(h.srv.URL+"/filesystem.Filesystem/Stat", "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code, Message string }
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if err != nil || body.Code != tt.code || body.Message == "" {
			t.Errorf("%s: status %d, body %+v (%v); want code %s", tt.name, res.StatusCode, body, err, tt.code)
		}
	}
	_, err := h.fs.Stat(context.Background(), connect.NewRequest(&fspb.StatRequest{Path: ""}))
	wantCode(t, "Stat after bad messages", err, 0)
}

// TestFSInvalidUTF8Names: names and link targets the sandbox wrote in
// another encoding than UTF-8 are shown with U+FFFD for the invalid
// bytes, rather than failing the whole call (protobuf strings must be
// UTF-8).
func TestFSInvalidUTF8Names(t *testing.T) {
	h := newFSHarness(t)
	h.plant(t, map[string]string{"d/caf\xe9.txt": "x", "d/l\xff": "->t\xfe\xfd", "link": "->t\xff"})
	res, err := h.fs.ListDir(context.Background(), connect.NewRequest(&fspb.ListDirRequest{Path: "d"}))
	if err != nil {
		t.Fatalf("ListDir of a directory with invalid UTF-8 names: %v", err)
	}
	var got []string
	for _, e := range res.Msg.GetEntries() {
		got = append(got, e.GetName()+" "+e.GetPath()+" "+e.GetSymlinkTarget())
	}
	want := []string{"caf\uFFFD.txt /home/user/d/caf\uFFFD.txt ", "l\uFFFD /home/user/d/l\uFFFD /home/user/d/t\uFFFD"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("ListDir = %q, want %q", got, want)
	}
	st, err := h.fs.Stat(context.Background(), connect.NewRequest(&fspb.StatRequest{Path: "link"}))
	if err != nil || st.Msg.GetEntry().GetSymlinkTarget() != "/home/user/t\uFFFD" {
		t.Errorf("Stat of a link with an invalid UTF-8 target = %v, %v; want its target with U+FFFD", st, err)
	}
	ev := (&activeWatch{}).event(change{name: "n\xff"}, false)
	if ev.GetName() != "n\uFFFD" {
		t.Errorf("watch event name %q, want n\uFFFD", ev.GetName())
	}
}
