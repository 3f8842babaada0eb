package strictjson

import (
	"strings"
	"testing"
)

// TestDecode: exactly one value of the known shape, with only JSON
// whitespace after it.
func TestDecode(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"one value", `{"a":1}`, ""},
		{"a line", "{\"a\":1}\n", ""},
		{"JSON whitespace after", "{\"a\":1} \t\r\n", ""},
		{"unknown field", `{"a":1,"b":2}`, `unknown field "b"`},
		{"two values", `{"a":1} {"a":2}`, "more than one JSON value"},
		{"garbage after", `{"a":1}x`, "more than one JSON value"},
		{"a form feed after", "{\"a\":1}\f", "more than one JSON value"},
		{"empty", "", "EOF"},
		{"wrong type", `{"a":"1"}`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		var v struct {
			A int `json:"a"`
		}
		err := Decode([]byte(tt.in), &v)
		if got := errString(err); tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: Decode(%q) = %v, want %q", tt.name, tt.in, err, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// BenchmarkDecode decodes an agent's exited event.
func BenchmarkDecode(b *testing.B) {
	line := []byte(`{"kind":"exited","id":3,"status":{"exit_code":137,"signal":9},"cpu_time_us":5,"max_rss_kib":1024}` + "\n")
	var v struct {
		Kind   string `json:"kind"`
		ID     uint64 `json:"id"`
		Status struct {
			ExitCode int `json:"exit_code"`
			Signal   int `json:"signal"`
		} `json:"status"`
		CPUTimeUS int64 `json:"cpu_time_us"`
		MaxRSSKiB int64 `json:"max_rss_kib"`
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(line, &v); err != nil {
			b.Fatal(err)
		}
	}
}
