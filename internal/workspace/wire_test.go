package workspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// frame is body framed as EncodeReply frames it.
func frame(body string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestReadReply: a reply is read only whole, strictly, and within
// MaxReplyBytes, whatever the box sends.
func TestReadReply(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, MaxReplyBytes+1)
	// a bomb: as many empty entries as fit in the bound, millions
	bomb := frame(`{"entries":[{}` + strings.Repeat(",{}", (MaxReplyBytes-20)/3) + `]}`)
	tests := []struct {
		name string
		in   []byte
		list int    // the entries a listing may have; 0 for another operation
		want string // "" for success
	}{
		{"entry", frame(`{"uid":1,"gid":2,"entry":{"type":"file","size":3,"mode":420,"mtime_sec":0,"mtime_nsec":0,"uid":1,"gid":2}}`), 0, ""},
		{"over the bound, refused before it is read", huge, 0, "over"},
		{"unknown field", frame(`{"uid":1,"gid":2,"owner":"root"}`), 0, "unknown field"},
		{"two values", frame(`{"uid":1,"gid":2}{}`), 0, "more than one"},
		{"not JSON", frame(`garbage`), 0, "decoding"},
		{"short body", frame(`{"uid":1}`)[:6], 0, "reading"},
		{"no length", []byte{0, 0}, 0, "reading"},
		{"negative uid", frame(`{"uid":-1,"gid":2}`), 0, "decoding"},
		{"8 MiB of empty entries, refused at the limit", bomb, 3, "over the limit of 3 entries"},
		{"a listing answering another operation", frame(`{"entries":[]}`), 0, "lists nothing"},
		{"a listing at the limit", frame(`{"entries":[{},{}]}`), 2, ""},
		{"a field twice", frame(`{"uid":1,"uid":2}`), 0, "twice"},
		{"a header and nothing more", binary.BigEndian.AppendUint32(nil, MaxReplyBytes), 0, "reading"},
		{"whitespace after", frame("{\"uid\":1} \n"), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadReply(bytes.NewReader(tt.in), tt.list)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ReadReply() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ReadReply() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestReadReplyBombStopsEarly: a listing of millions of empty entries
// is refused at the entry over the limit, its bytes past that unread.
func TestReadReplyBombStopsEarly(t *testing.T) {
	r := bytes.NewReader(frame(`{"entries":[{}` + strings.Repeat(",{}", (MaxReplyBytes-20)/3) + `]}`))
	if _, err := ReadReply(r, 3); err == nil {
		t.Fatalf("ReadReply() = nil, want the listing refused")
	}
	if left := r.Len(); left < MaxReplyBytes/2 {
		t.Errorf("ReadReply() read all but %d bytes of the bomb, want it stopped near the start", left)
	}
}

// TestReplyRoundTripBytes: a listed name and a link target that are not
// UTF-8 come back byte for byte, at the lengths the bounds allow.
func TestReplyRoundTripBytes(t *testing.T) {
	name, link := strings.Repeat("\xff", maxNameBytes), strings.Repeat("\xfe", maxPathBytes)
	e := Entry{Name: name, Path: name, Type: TypeSymlink, Mode: 0o777, ModTime: time.Unix(0, 0), LinkTarget: link}
	b, err := EncodeReply(Reply{Entries: []WireEntry{ToWire(e, true)}})
	if err != nil {
		t.Fatalf("EncodeReply() = %v", err)
	}
	out, err := ReadReply(bytes.NewReader(b), 1)
	if err != nil {
		t.Fatalf("ReadReply() = %v", err)
	}
	got, err := FromWire(".", out.Entries[0], true)
	if err != nil || got.Name != name || got.LinkTarget != link {
		t.Errorf("FromWire() = %q -> %q, %v; want the %d- and %d-byte originals", got.Name, got.LinkTarget, err, len(name), len(link))
	}
}

// TestReplyRoundTrip: what EncodeReply frames, ReadReply reads back.
func TestReplyRoundTrip(t *testing.T) {
	mt := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	e := Entry{Name: "x", Path: "d/x", Type: TypeSymlink, Size: 4, Mode: 0o777, ModTime: mt, UID: 1000, GID: 1001, LinkTarget: "/etc"}
	in := Reply{UID: 1000, GID: 1001, Entries: []WireEntry{ToWire(e, true)}}
	b, err := EncodeReply(in)
	if err != nil {
		t.Fatalf("EncodeReply() = %v", err)
	}
	out, err := ReadReply(bytes.NewReader(b), 1)
	if err != nil {
		t.Fatalf("ReadReply() = %v", err)
	}
	got, err := FromWire("d", out.Entries[0], true)
	if err != nil {
		t.Fatalf("FromWire() = %v", err)
	}
	if !got.ModTime.Equal(e.ModTime) || got.Name != e.Name || got.Path != e.Path || got.Type != e.Type || got.Size != e.Size ||
		got.Mode != e.Mode || got.UID != e.UID || got.GID != e.GID || got.LinkTarget != e.LinkTarget {
		t.Errorf("round trip = %+v, want %+v", got, e)
	}
	if _, err := EncodeReply(Reply{Error: &WireError{Msg: strings.Repeat("x", MaxReplyBytes)}}); err == nil {
		t.Errorf("EncodeReply() of a reply over MaxReplyBytes succeeded")
	}
}

// TestFromWire: an entry from the box is checked field by field, its
// path is the host's own, and its time is clamped.
func TestFromWire(t *testing.T) {
	ok := WireEntry{Type: TypeFile, Size: 1, Mode: 0o644}
	with := func(f func(*WireEntry)) WireEntry { w := ok; f(&w); return w }
	tests := []struct {
		name   string
		w      WireEntry
		listed bool
		want   string // "" for success
	}{
		{"plain", ok, false, ""},
		{"listed", with(func(w *WireEntry) { w.Name = []byte("f") }), true, ""},
		{"listed without a name", ok, true, "no file name"},
		{"listed name with a slash", with(func(w *WireEntry) { w.Name = []byte("../etc") }), true, "no file name"},
		{"listed name ..", with(func(w *WireEntry) { w.Name = []byte("..") }), true, "no file name"},
		{"listed name with NUL", with(func(w *WireEntry) { w.Name = []byte("a\x00") }), true, "no file name"},
		{"listed name too long", with(func(w *WireEntry) { w.Name = []byte(strings.Repeat("n", 256)) }), true, "no file name"},
		{"name outside a listing", with(func(w *WireEntry) { w.Name = []byte("other") }), false, "outside a listing"},
		{"unknown type", with(func(w *WireEntry) { w.Type = "device" }), false, "type"},
		{"negative size", with(func(w *WireEntry) { w.Size = -1 }), false, "size"},
		{"setuid bit", with(func(w *WireEntry) { w.Mode = 0o4755 }), false, "permission bits"},
		{"file with a link target", with(func(w *WireEntry) { w.Link = []byte("/etc") }), false, "link target"},
		{"link target too long", with(func(w *WireEntry) { w.Type = TypeSymlink; w.Link = []byte(strings.Repeat("l", 4097)) }), false, "link target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := FromWire("dir", tt.w, tt.listed)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("FromWire() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("FromWire() = %+v, %v; want an error containing %q", e, err, tt.want)
			case tt.want == "" && !tt.listed && e.Path != "dir":
				t.Errorf("FromWire() path = %q, want the host's own %q", e.Path, "dir")
			}
		})
	}
	for _, sec := range []int64{-1 << 62, 1 << 62} {
		e, err := FromWire("f", with(func(w *WireEntry) { w.Sec, w.Nsec = sec, -1<<40 }), false)
		if err != nil || e.ModTime.Before(minModTime) || e.ModTime.After(maxModTime) {
			t.Errorf("FromWire(mtime %d s) = %v, %v; want a time in [%v, %v]", sec, e.ModTime, err, minModTime, maxModTime)
		}
	}
}

// TestWireErrors: an error crosses as its codes and message, and comes
// back matching the same sentinels; a message or code no agent sends is
// refused.
func TestWireErrors(t *testing.T) {
	for _, c := range errorCodes {
		in := &pathError{msg: "op \"p\": " + c.code, kinds: []error{c.err}}
		out, bad := FromWireError(ToWireError(in))
		if bad != nil || !errors.Is(out, c.err) || out.Error() != AgentPrefix+in.Error() {
			t.Errorf("%s: back as %v (refused: %v), want %q matching its sentinel", c.code, out, bad, in)
		}
	}
	full := &pathError{msg: "full", kinds: []error{ErrTooLarge, ErrNoSpace}}
	if out, _ := FromWireError(ToWireError(full)); !errors.Is(out, ErrTooLarge) || !errors.Is(out, ErrNoSpace) {
		t.Errorf("a full disk came back as %v, want ErrTooLarge and ErrNoSpace", out)
	}
	if out, _ := FromWireError(ToWireError(errorf(ErrDenied, "denied"))); !errors.Is(out, fs.ErrPermission) {
		t.Errorf("a denial came back as %v, which is not fs.ErrPermission", out)
	}
	if w := ToWireError(errors.New(strings.Repeat("m", 5000))); len(w.Msg) > maxMessageBytes {
		t.Errorf("ToWireError kept a message of %d bytes, over %d", len(w.Msg), maxMessageBytes)
	}
	for _, msg := range []string{
		"stat \"a" + strings.Repeat("é", 750) + "\": not found", // over the bound, a 2-byte rune cut at it
		"x" + strings.Repeat("€", 500),                          // 3-byte runes
		"bad \xff\xfe bytes " + strings.Repeat("m", 1100),       // not UTF-8
	} {
		b, err := EncodeReply(Reply{Error: ToWireError(errors.New(msg))})
		if err != nil {
			t.Fatalf("EncodeReply() = %v", err)
		}
		rep, err := ReadReply(bytes.NewReader(b), 0)
		if err != nil {
			t.Fatalf("ReadReply() = %v", err)
		}
		out, bad := FromWireError(rep.Error)
		if bad != nil || utf8.ValidString(msg) && !strings.HasPrefix(msg, strings.TrimPrefix(out.Error(), AgentPrefix)) {
			t.Errorf("a %d-byte message came back as %v (refused: %v), want it cut at a rune within %d bytes", len(msg), out, bad, maxMessageBytes)
		}
	}
	for _, w := range []WireError{
		{Msg: ""},
		{Msg: strings.Repeat("m", maxMessageBytes+1)},
		{Msg: "two\nlines"},
		{Msg: "escape \x1b[2J"},
		{Msg: "x", Codes: []string{"no_such_code"}},
		{Msg: "x", Codes: make([]string, len(errorCodes)+1)},
	} {
		if out, bad := FromWireError(&w); bad == nil {
			t.Errorf("FromWireError(%+v) = %v, want it refused", w, out)
		}
	}
}
