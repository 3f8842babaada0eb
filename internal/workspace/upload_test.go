package workspace

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestUpload: an upload's chunks read back whole only with their end
// mark; a stream cut anywhere before it is io.ErrUnexpectedEOF.
func TestUpload(t *testing.T) {
	var whole bytes.Buffer
	w := &UploadWriter{W: &whole}
	for _, s := range []string{"hello, ", "", "world"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatalf("Write(%q) = %v", s, err)
		}
	}
	unended := bytes.Clone(whole.Bytes())
	if err := w.End(); err != nil {
		t.Fatalf("End() = %v", err)
	}
	tests := []struct {
		name string
		in   []byte
		want string
		err  error
	}{
		{"whole", whole.Bytes(), "hello, world", nil},
		{"no end mark (aborted)", unended, "hello, world", io.ErrUnexpectedEOF},
		{"cut in a chunk", unended[:6], "he", io.ErrUnexpectedEOF},
		{"cut in a length", unended[:2], "", io.ErrUnexpectedEOF},
		{"nothing", nil, "", io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		got, err := io.ReadAll(&UploadReader{R: bytes.NewReader(tt.in)})
		if string(got) != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: read %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.err)
		}
	}
}
