package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRename(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		outFile := newDecoy(t, filepath.Join(e.out, "keep"), 0o666)
		e.mkdirs(t, "dir/sub", "full")
		writeFile(t, filepath.Join(e.ws, "a"), "A", 0o644)
		writeFile(t, filepath.Join(e.ws, "full/f"), "F", 0o644)
		writeFile(t, filepath.Join(e.ws, "file"), "x", 0o644)
		symlink(t, e.out, filepath.Join(e.ws, "outlink"))
		symlink(t, outFile.path, filepath.Join(e.ws, "evil"))
		e.give(t)
		tests := []struct {
			src, dst string
			want     error
			wantType string
		}{
			{src: "a", dst: "new/deep/b", wantType: TypeFile},
			{src: "new/deep/b", dst: "/workspace/c", wantType: TypeFile},
			{src: "evil", dst: "moved-link", wantType: TypeSymlink},
			{src: "c", dst: "moved-link", wantType: TypeFile},
			{src: "missing", dst: "x", want: ErrNotFound},
			{src: "outlink/keep", dst: "stolen", want: ErrLink},
			{src: "moved-link", dst: "outlink/planted", want: ErrLink},
			{src: "moved-link", dst: "outlink/new/planted", want: ErrLink},
			{src: "dir", dst: "dir/sub/inside", want: ErrBadPath},
			{src: "file", dst: "full", want: ErrIsDir},
			{src: "dir", dst: "full", want: ErrNotEmpty},
			{src: ".", dst: "x", want: ErrBadPath},
			{src: "file", dst: "/workspace", want: ErrBadPath},
			{src: "/etc/passwd", dst: "x", want: ErrBadPath},
			{src: "file", dst: "../x", want: ErrBadPath},
		}
		for _, tt := range tests {
			ent, err := e.d.Rename(tt.src, tt.dst)
			wantErr(t, "Rename("+tt.src+", "+tt.dst+")", err, tt.want)
			if err == nil && (ent.Type != tt.wantType || ent.Name != filepath.Base(tt.dst)) {
				t.Errorf("Rename(%s, %s) entry = %+v, want a %s named %s", tt.src, tt.dst, ent, tt.wantType, filepath.Base(tt.dst))
			}
		}
		if got, err := os.ReadFile(filepath.Join(e.ws, "moved-link")); err != nil || string(got) != "A" {
			t.Errorf("moved-link holds %q, %v; want %q", got, err, "A")
		}
		if uid, gid := owner(t, filepath.Join(e.ws, "new/deep")); uid != e.uid || gid != e.gid {
			t.Errorf("new/deep owned by %d:%d, want %d:%d", uid, gid, e.uid, e.gid)
		}
		checkNames(t, e.out, "keep")
		outFile.check(t)
	})
}

func TestReadOnlyRename(t *testing.T) {
	forEachIdentity(t, Limits{ReadOnly: true}, func(t *testing.T, e *env) {
		writeFile(t, filepath.Join(e.ws, "a"), "A", 0o644)
		_, err := e.d.Rename("a", "b")
		wantErr(t, "Rename on a read-only workspace", err, ErrReadOnly)
		checkNames(t, e.ws, "a")
	})
}

func TestEntryOwner(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		ent, err := e.d.Write("f", strings.NewReader(""), 0)
		if err != nil {
			t.Fatal(err)
		}
		if uid, gid := e.d.Owner(); uid != e.uid || gid != e.gid {
			t.Errorf("Owner() = %d:%d, want %d:%d", uid, gid, e.uid, e.gid)
		}
		if ent.UID != uint32(e.uid) || ent.GID != uint32(e.gid) {
			t.Errorf("Write entry owner = %d:%d, want %d:%d", ent.UID, ent.GID, e.uid, e.gid)
		}
	})
}

// TestNoSpaceError: a full workspace is told apart from a file over the
// limit (both are ErrTooLarge), so an API can answer "disk full".
func TestNoSpaceError(t *testing.T) {
	for _, errno := range []error{unix.ENOSPC, unix.EDQUOT} {
		err := fsError("writing", wsPath{elems: []string{"f"}}, errno)
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrTooLarge) {
			t.Errorf("fsError(%v) = %v; want ErrNoSpace and ErrTooLarge", errno, err)
		}
	}
}
