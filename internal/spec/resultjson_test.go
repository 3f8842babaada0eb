package spec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// encoded is what encoding/json's Encoder writes for r: WriteJSON's
// contract.
func encoded(t testing.TB, r Result) string {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestResultWriteJSONMatchesEncoder(t *testing.T) {
	hostile := "a\"b\\c\n\r\t\b\f\x00\x01\x1f\x7f<>&\u2028\u2029é€😀\xff\xc3(\xe2\x82"
	tests := []struct {
		name string
		r    Result
	}{
		{"empty", Result{}},
		{"plain", Result{ExitCode: 1, Stdout: "hi\n", Stderr: "oops\n", WallTimeMS: 1.5}},
		{"flood", Result{ExitCode: 124, Stdout: strings.Repeat("y\n", 70000), StdoutTruncated: true}},
		{"hostile bytes", Result{Stdout: hostile, Stderr: strings.Repeat(hostile, 3)}},
		{"fields that look like ours", Result{
			Signal: `,"stdout":"","stderr":""`, Error: `,"stdout":"","stderr":""`,
			Stdout: `,"stdout":"","stderr":""`, Value: `"stdout":""`,
			Exception: &Exception{Type: "E", Message: `,"stdout":"","stderr":""`},
			Network:   []NetworkEvent{{Host: `,"stdout":"","stderr":""`}},
		}},
		{"interpreter", Result{Value: "1", Outputs: []Output{{MimeType: "text/plain", Data: "x", Encoding: "utf-8"}}, InterpreterRestarted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got bytes.Buffer
			if err := tt.r.WriteJSON(&got); err != nil {
				t.Fatalf("WriteJSON: %v", err)
			}
			if want := encoded(t, tt.r); got.String() != want {
				t.Errorf("WriteJSON wrote\n%.300q\nwant (encoding/json)\n%.300q", got.String(), want)
			}
		})
	}
}

// FuzzResultWriteJSON checks that any output, however hostile, is
// written exactly as encoding/json writes it.
func FuzzResultWriteJSON(f *testing.F) {
	for _, s := range []string{"", "y\n", "<script>&", "\xff\xfe", "\u2028", "\x00\x1f\"\\", "é😀"} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, out, errOut string) {
		r := Result{Stdout: out, Stderr: errOut, Signal: errOut}
		var got bytes.Buffer
		if err := r.WriteJSON(&got); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if want := encoded(t, r); got.String() != want {
			t.Errorf("WriteJSON(%q, %q) = %q, want %q", out, errOut, got.String(), want)
		}
	})
}
