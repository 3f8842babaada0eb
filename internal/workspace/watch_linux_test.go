package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAddWatch: a watch lands on the workspace's own directory, and never
// on one a planted link points to.
func TestAddWatch(t *testing.T) {
	forEachIdentity(t, Limits{}, func(t *testing.T, e *env) {
		if err := os.Mkdir(filepath.Join(e.ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(e.ws, "file"), "x", 0o644)
		symlink(t, e.out, filepath.Join(e.ws, "outlink"))
		e.give(t)
		in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(in)
		tests := []struct {
			path string
			want error
		}{
			{path: "."},
			{path: "sub"},
			{path: "outlink", want: ErrLink},
			{path: "outlink/x", want: ErrLink},
			{path: "file", want: ErrNotDir},
			{path: "missing", want: ErrNotFound},
			{path: "/etc", want: ErrBadPath},
		}
		for _, tt := range tests {
			_, err := e.d.AddWatch(in, tt.path, unix.IN_CREATE)
			wantErr(t, "AddWatch("+tt.path+")", err, tt.want)
		}
		// Only the two watched directories report: a file made outside
		// (where the link points) is never seen.
		writeFile(t, filepath.Join(e.out, "outside-file"), "x", 0o644)
		writeFile(t, filepath.Join(e.ws, "sub", "inside"), "x", 0o644)
		buf := make([]byte, 4096)
		n, err := unix.Read(in, buf)
		if err != nil {
			t.Fatalf("reading inotify events: %v", err)
		}
		got := 0
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafePointer(buf[off:]))
			name := string(buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)])
			if trimNUL(name) != "inside" {
				t.Errorf("event for %q, want only %q", trimNUL(name), "inside")
			}
			got++
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		if got != 1 {
			t.Errorf("got %d events, want 1", got)
		}
	})
}
