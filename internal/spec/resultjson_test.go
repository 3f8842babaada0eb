package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
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
		{"every field set", everyFieldSet(t)},
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

// everyFieldSet returns a Result with every field, and every field of
// what it points to or holds, set to a value other than its zero, so that
// a field added later is covered without editing the test.
func everyFieldSet(t *testing.T) Result {
	var r Result
	fill(t, reflect.ValueOf(&r).Elem(), "r")
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("everyFieldSet left %s zero", v.Type().Field(i).Name)
		}
	}
	return r
}

// fill sets v, named path, to a value other than its kind's zero.
func fill(t *testing.T, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(path + " <&>\n")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), path+"[0]")
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("fill: %s is a %s, which it cannot set", path, v.Kind())
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
