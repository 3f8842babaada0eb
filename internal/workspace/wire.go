package workspace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/warden-sandbox/warden/internal/strictjson"
)

// The wire form of a file operation's answer when a box's agent serves
// its own /workspace (docs/protocol.md, "Files over the stream"). The
// agent runs Dir on its side and answers with a Reply; the host parses
// it as hostile input: bounded in size, strictly decoded, every field
// checked, paths rebuilt from the host's own request, never taken from
// the answer.

// MaxReplyBytes bounds one encoded Reply: a listing of DefaultMaxEntries
// entries of long names fits, and an agent trims a longer one (reported
// as ErrTruncated).
const MaxReplyBytes = 8 << 20

// maxMessageBytes bounds an error message from the box.
const maxMessageBytes = 1024

// errorCodes is the one list of the codes that carry this package's
// sentinels over the wire; an error wraps each sentinel it matches, and
// a code the host does not know is a broken answer.
var errorCodes = []struct {
	code string
	err  error
}{
	{"read_only", ErrReadOnly},
	{"not_found", ErrNotFound},
	{"exists", ErrExists},
	{"is_dir", ErrIsDir},
	{"not_dir", ErrNotDir},
	{"not_empty", ErrNotEmpty},
	{"denied", ErrDenied},
	{"bad_path", ErrBadPath},
	{"bad_mode", ErrBadMode},
	{"too_large", ErrTooLarge},
	{"no_space", ErrNoSpace},
	{"truncated", ErrTruncated},
	{"not_regular", ErrNotRegular},
	{"hard_link", ErrHardLink},
	{"busy", ErrBusy},
	{"link", ErrLink},
}

// Sentinels is every sentinel that crosses the wire, in the order of
// the one table of codes: what a test ranges over to compare errors.
func Sentinels() []error {
	out := make([]error, 0, len(errorCodes))
	for _, c := range errorCodes {
		out = append(out, c.err)
	}
	return out
}

// WireError is an operation's error: the codes of the sentinels it
// wraps and its one-line message (naming workspace paths only).
type WireError struct {
	Codes []string `json:"codes,omitempty"`
	Msg   string   `json:"msg"`
}

// WireEntry is an Entry on the wire. Its path is not sent: the host
// knows which path it asked about (and, for a listing, joins the name).
// Name and Link cross as bytes (base64 in JSON): a name need not be
// UTF-8, and JSON would turn each invalid byte into a 3-byte U+FFFD,
// losing the name and overrunning the bounds the host checks.
type WireEntry struct {
	// Name is the entry's name in a listing; empty in other answers.
	Name []byte `json:"name,omitempty"`
	Type string `json:"type"`
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
	Sec  int64  `json:"mtime_sec"`
	Nsec int64  `json:"mtime_nsec"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	Link []byte `json:"link,omitempty"`
}

// Reply is the agent's answer to one file operation. UID and GID are the
// ids the agent acts as (Files.Owner); exactly one of Entry, Entries (a
// listing, possibly empty) or Error is what the operation returned, and
// a listing cut short carries both Entries and an ErrTruncated Error.
type Reply struct {
	UID     uint32      `json:"uid"`
	GID     uint32      `json:"gid"`
	Entry   *WireEntry  `json:"entry,omitempty"`
	Entries []WireEntry `json:"entries,omitempty"`
	Error   *WireError  `json:"error,omitempty"`
}

// ToWire is e for a Reply; name is kept for a listing's entries only.
func ToWire(e Entry, listed bool) WireEntry {
	w := WireEntry{Type: e.Type, Size: e.Size, Mode: uint32(e.Mode.Perm()), Sec: e.ModTime.Unix(),
		Nsec: int64(e.ModTime.Nanosecond()), UID: e.UID, GID: e.GID, Link: []byte(e.LinkTarget)}
	if listed {
		w.Name = []byte(e.Name)
	}
	return w
}

// ToWireError is err for a Reply (nil for nil).
func ToWireError(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Msg: truncateUTF8(strings.ToValidUTF8(err.Error(), "\uFFFD"), maxMessageBytes)}
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			w.Codes = append(w.Codes, c.code)
		}
	}
	return w
}

// truncateUTF8 is s cut to at most n bytes at a rune's start, so that
// it stays valid UTF-8 (JSON would turn a cut rune into a 3-byte U+FFFD,
// over the bound the host checks).
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// AgentPrefix starts the message of every error FromWireError makes:
// the text is the box's, and the tenant must be able to tell it from
// the daemon's own.
const AgentPrefix = "the sandbox's agent: "

// FromWireError is the error w describes, its message after
// AgentPrefix, wrapping the sentinels of its codes (ErrDenied with
// EACCES, so it matches fs.ErrPermission as a local one does), or why w
// is no valid error.
func FromWireError(w *WireError) (error, error) {
	if len(w.Msg) == 0 || len(w.Msg) > maxMessageBytes || strings.IndexFunc(w.Msg, notPrintable) >= 0 {
		return nil, fmt.Errorf("an error message of %d bytes that is empty, over %d bytes or not one printable line", len(w.Msg), maxMessageBytes)
	}
	if len(w.Codes) > len(errorCodes) {
		return nil, fmt.Errorf("%d error codes, more than the %d there are", len(w.Codes), len(errorCodes))
	}
	pe := &pathError{msg: AgentPrefix + w.Msg}
	for _, code := range w.Codes {
		kind := codeError(code)
		if kind == nil {
			return nil, fmt.Errorf("unknown error code %q", code)
		}
		pe.kinds = append(pe.kinds, kind)
		if errors.Is(kind, ErrDenied) {
			pe.kinds = append(pe.kinds, syscall.EACCES)
		}
	}
	return pe, nil
}

func codeError(code string) error {
	for _, c := range errorCodes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// FromWire is the Entry w describes for workspace path p (as the host
// asked for it, in the form Entry.Path has), or why w is no valid entry;
// a listing's entry is p joined with its name.
func FromWire(p string, w WireEntry, listed bool) (Entry, error) {
	if listed {
		if err := checkName(string(w.Name)); err != nil {
			return Entry{}, err
		}
		p = path.Join(p, string(w.Name))
	} else if len(w.Name) != 0 {
		return Entry{}, fmt.Errorf("a name %q outside a listing", w.Name)
	}
	switch {
	case w.Type != TypeFile && w.Type != TypeDir && w.Type != TypeSymlink && w.Type != TypeOther:
		return Entry{}, fmt.Errorf("entry %q has type %q", p, w.Type)
	case w.Size < 0:
		return Entry{}, fmt.Errorf("entry %q has size %d", p, w.Size)
	case w.Mode&^0o777 != 0:
		return Entry{}, fmt.Errorf("entry %q has mode %#o, more than permission bits", p, w.Mode)
	case len(w.Link) != 0 && w.Type != TypeSymlink:
		return Entry{}, fmt.Errorf("entry %q is a %s with a link target", p, w.Type)
	case len(w.Link) > maxPathBytes || bytes.IndexByte(w.Link, 0) >= 0:
		return Entry{}, fmt.Errorf("entry %q has a link target over %d bytes or holding a NUL", p, maxPathBytes)
	}
	e := Entry{Name: path.Base(p), Path: p, Type: w.Type, Size: w.Size, Mode: fs.FileMode(w.Mode),
		ModTime: clampTime(w.Sec, w.Nsec), UID: w.UID, GID: w.GID, LinkTarget: string(w.Link)}
	return e, nil
}

// checkName refuses a listed name that is no single element of a path.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxNameBytes || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("a listed name %q that is no file name", name)
	}
	return nil
}

// CleanPath is p in the form Entry.Path has ("." for the workspace), or
// the error Dir would give for it (ErrBadPath).
func CleanPath(p string) (string, error) {
	wp, err := parsePath(p)
	if err != nil {
		return "", err
	}
	return wp.String(), nil
}

// EncodeReply frames r: a 4-byte big-endian length, then its JSON; one
// over MaxReplyBytes is an error.
func EncodeReply(r Reply) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding a file reply: %w", err)
	}
	if len(body) > MaxReplyBytes {
		return nil, fmt.Errorf("a file reply of %d bytes, over %d", len(body), MaxReplyBytes)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...), nil
}

// ReadReply reads one framed Reply from r, refusing one over
// MaxReplyBytes before reading it, and decodes it strictly as a stream:
// memory grows only with the bytes that arrive, and a listing is
// refused at its entry maxEntries+1, before that entry is decoded (an
// operation that lists nothing passes 0, and a listing in its answer is
// refused). It checks the frame only; the caller checks the fields
// against its request.
func ReadReply(r io.Reader, maxEntries int) (Reply, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Reply{}, fmt.Errorf("reading a file reply: %w", err)
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > MaxReplyBytes {
		return Reply{}, fmt.Errorf("a file reply of %d bytes, over %d", n, MaxReplyBytes)
	}
	src := &frameReader{r: r, left: int64(n)}
	dec := json.NewDecoder(src)
	dec.DisallowUnknownFields()
	rep, err := decodeReply(dec, maxEntries)
	if err == nil {
		if _, err = dec.Token(); err == nil {
			err = strictjson.ErrTrailing
		} else if errors.Is(err, io.EOF) && src.left == 0 {
			err = nil
		}
	}
	switch {
	case src.err != nil:
		return Reply{}, fmt.Errorf("reading a file reply: %w", src.err)
	case err != nil:
		return Reply{}, fmt.Errorf("decoding a file reply: %w", err)
	}
	return rep, nil
}

// frameReader reads the left bytes of a frame from r, remembering why r
// failed (its end before the frame's is io.ErrUnexpectedEOF), so that a
// cut or late answer is told from a malformed one.
type frameReader struct {
	r    io.Reader
	left int64
	err  error
}

func (f *frameReader) Read(b []byte) (int, error) {
	if f.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > f.left {
		b = b[:f.left]
	}
	n, err := f.r.Read(b)
	f.left -= int64(n)
	switch {
	case errors.Is(err, io.EOF) && f.left > 0:
		f.err = io.ErrUnexpectedEOF
		return n, f.err
	case err != nil && !errors.Is(err, io.EOF):
		f.err = err
	}
	return n, err
}

// decodeReply decodes a Reply's object from dec field by field: each
// field at most once, and the entries one at a time, at most maxEntries.
func decodeReply(dec *json.Decoder, maxEntries int) (Reply, error) {
	var rep Reply
	if err := wantDelim(dec, '{'); err != nil {
		return Reply{}, err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Reply{}, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return Reply{}, fmt.Errorf("field %q twice", key)
		}
		seen[key] = true
		switch key {
		case "uid":
			err = dec.Decode(&rep.UID)
		case "gid":
			err = dec.Decode(&rep.GID)
		case "entry":
			err = dec.Decode(&rep.Entry)
		case "error":
			err = dec.Decode(&rep.Error)
		case "entries":
			rep.Entries, err = decodeEntries(dec, maxEntries)
		default:
			err = fmt.Errorf("unknown field %q", key)
		}
		if err != nil {
			return Reply{}, err
		}
	}
	return rep, wantDelim(dec, '}')
}

// decodeEntries decodes a listing's array one entry at a time, refusing
// entry maxEntries+1 before decoding it.
func decodeEntries(dec *json.Decoder, maxEntries int) ([]WireEntry, error) {
	if maxEntries <= 0 {
		return nil, errors.New("a listing in the answer to an operation that lists nothing")
	}
	if err := wantDelim(dec, '['); err != nil {
		return nil, err
	}
	entries := []WireEntry{}
	for dec.More() {
		if len(entries) == maxEntries {
			return nil, fmt.Errorf("a listing over the limit of %d entries", maxEntries)
		}
		var w WireEntry
		if err := dec.Decode(&w); err != nil {
			return nil, err
		}
		entries = append(entries, w)
	}
	return entries, wantDelim(dec, ']')
}

// wantDelim reads dec's next token, which must be d.
func wantDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return fmt.Errorf("%v where %q belongs", tok, d)
	}
	return nil
}

// The range of modification times an Entry reports: the years JSON and
// RFC 3339 can carry. The sandbox sets its files' times at will, and its
// tmpfs keeps any 64-bit second: outside the range an Entry could not be
// encoded, and a listing would fail for everyone who asks for it.
var (
	minModTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	maxModTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// clampTime is sec and nsec clamped to [minModTime, maxModTime]: by the
// seconds first, which time.Unix could overflow on, then whole, since
// nanoseconds outside 0-999999999 (which no kernel reports, but a fuzzer
// or a hostile agent does) move it across a bound.
func clampTime(sec, nsec int64) time.Time {
	switch {
	case sec < minModTime.Unix():
		return minModTime
	case sec > maxModTime.Unix():
		return maxModTime
	}
	switch t := time.Unix(sec, nsec); {
	case t.Before(minModTime):
		return minModTime
	case t.After(maxModTime):
		return maxModTime
	default:
		return t
	}
}
