package workspace

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParsePath checks that every path parsePath accepts names a place
// inside /workspace: no element is empty, "." or "..", none holds a slash
// or NUL, and its String form parses back to the same path.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{".", "a/b", "./a", "/workspace", "/workspace/a/../b", "../x", "a//b", "/etc/passwd", "a/./b", "a\x00b", "/workspace/", "…/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		w, err := parsePath(p)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("parsePath(%q) error has several lines: %q", p, err)
			}
			return
		}
		for _, e := range w.elems {
			if e == "" || e == "." || e == ".." || strings.ContainsAny(e, "/\x00") {
				t.Fatalf("parsePath(%q) kept element %q", p, e)
			}
		}
		back, err := parsePath(w.String())
		if err != nil || back.String() != w.String() {
			t.Errorf("parsePath(%q) = %q, which parses back to %q, %v", p, w.String(), back.String(), err)
		}
	})
}

// FuzzReply feeds any bytes to the host's reading of an agent's answer:
// it never panics, and every entry and error it accepts is one the host
// could have made: a plain name below the asked path, one of the four
// types, permission bits only, a time in range, a one-line message.
func FuzzReply(f *testing.F) {
	for _, s := range []string{
		`{"uid":1,"gid":1,"entry":{"type":"file","size":3,"mode":420,"mtime_sec":0,"mtime_nsec":0,"uid":1,"gid":1}}`,
		`{"uid":1,"gid":1,"entries":[{"name":"YQ==","type":"symlink","size":1,"mode":511,"mtime_sec":-99999999999,"mtime_nsec":5,"uid":1,"gid":1,"link":"L2V0Yw=="}]}`,
		`{"uid":1,"gid":1,"error":{"codes":["not_found","denied"],"msg":"stat \"x\": no such file"}}`,
	} {
		f.Add(frame(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := ReadReply(bytes.NewReader(b), DefaultMaxEntries)
		if err != nil {
			return
		}
		var ws []WireEntry
		if rep.Entry != nil {
			ws = append(ws, *rep.Entry)
		}
		for i, w := range append(ws, rep.Entries...) {
			e, err := FromWire("d", w, i >= len(ws))
			if err != nil {
				continue
			}
			if back, err := parsePath(e.Path); err != nil || back.String() != e.Path || !strings.HasPrefix(e.Path, "d") {
				t.Fatalf("accepted entry path %q, not a plain path below d", e.Path)
			}
			if e.Mode&^0o777 != 0 || e.ModTime.Before(minModTime) || e.ModTime.After(maxModTime) || e.Size < 0 {
				t.Fatalf("accepted entry %+v", e)
			}
		}
		if rep.Error != nil {
			if err, bad := FromWireError(rep.Error); bad == nil && strings.ContainsAny(err.Error(), "\n\r\x00") {
				t.Fatalf("accepted message %q of several lines", err.Error())
			}
		}
	})
}
