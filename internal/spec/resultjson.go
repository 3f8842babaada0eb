package spec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// WriteJSON writes r to w as json.NewEncoder(w).Encode(r) would, byte for
// byte, newline included, but streams the output fields (up to
// output_bytes each, often a megabyte) through a small buffer instead of
// building the whole document in memory first. Encoding a flood's
// megabyte of "y\n" with encoding/json cost a fresh `warden run` some
// 40 ms of host CPU (buffers grown by doubling, each page faulted in, and
// a garbage collection), no sandbox's cgroup paying for it; streamed, it
// costs a tenth of that (docs/interpreters.md, "Output").
func (r Result) WriteJSON(w io.Writer) error {
	j, err := r.EncodeJSON()
	if err != nil {
		return err
	}
	return j.Write(w)
}

// ResultJSON is a Result whose small fields are already encoded, ready to
// be written with its output streamed (Write). Encoding comes first so
// that a caller learns of an encoding error (a NaN time, say) before it
// has written anything, such as an HTTP answer's 200 status.
type ResultJSON struct {
	r   Result
	doc []byte // r without its output, as json.Marshal writes it
	at  int    // where outputFields begins in doc
}

// EncodeJSON encodes every field of r but its output, which Write streams.
func (r Result) EncodeJSON() (ResultJSON, error) {
	rest := r
	rest.Stdout, rest.Stderr = "", ""
	doc, err := json.Marshal(rest)
	if err != nil {
		return ResultJSON{}, fmt.Errorf("encoding the result: %w", err)
	}
	// The output fields follow four scalars and a signal name, and no
	// string value can hold `,"` unescaped, so the first match is theirs.
	at := bytes.Index(doc, outputFields)
	if at < 0 {
		return ResultJSON{}, fmt.Errorf("encoding the result: no %s in %.80s", outputFields, doc)
	}
	return ResultJSON{r: r, doc: doc, at: at}, nil
}

// Write writes the Result to w as json.NewEncoder(w).Encode would; an
// error can only come from w.
func (j ResultJSON) Write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.Write(j.doc[:j.at])
	bw.WriteString(`,"stdout":`)
	writeJSONString(bw, j.r.Stdout)
	bw.WriteString(`,"stderr":`)
	writeJSONString(bw, j.r.Stderr)
	bw.Write(j.doc[j.at+len(outputFields):])
	bw.WriteByte('\n')
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the result: %w", err)
	}
	return nil
}

// outputFields is how json.Marshal writes empty output fields.
var outputFields = []byte(`,"stdout":"","stderr":""`)

// hexDigits spell the \u escapes.
const hexDigits = "0123456789abcdef"

// writeJSONString writes s as a JSON string with encoding/json's escapes
// (HTML-safe, as its Encoder's default): <, > and & as \u003c and so on,
// control characters, invalid UTF-8 as \ufffd, and U+2028 and U+2029.
// bufio.Writer records its first error and ignores later writes, so the
// caller's Flush reports it.
func writeJSONString(w *bufio.Writer, s string) {
	w.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if jsonSafe(b) {
				i++
				continue
			}
			w.WriteString(s[start:i])
			writeEscape(w, b)
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			w.WriteString(s[start:i])
			w.WriteString(`\ufffd`)
		case c == '\u2028' || c == '\u2029':
			w.WriteString(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hexDigits[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	w.WriteString(s[start:])
	w.WriteByte('"')
}

// jsonSafe says whether the ASCII byte b goes into a JSON string as is.
func jsonSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// writeEscape writes the escape of the ASCII byte b.
func writeEscape(w *bufio.Writer, b byte) {
	switch b {
	case '"', '\\':
		w.WriteByte('\\')
		w.WriteByte(b)
	case '\b':
		w.WriteString(`\b`)
	case '\f':
		w.WriteString(`\f`)
	case '\n':
		w.WriteString(`\n`)
	case '\r':
		w.WriteString(`\r`)
	case '\t':
		w.WriteString(`\t`)
	default:
		w.WriteString(`\u00`)
		w.WriteByte(hexDigits[b>>4])
		w.WriteByte(hexDigits[b&0xf])
	}
}
