package microvm

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// scripted is a QMP peer that answers with a fixed script and records
// what it was sent.
type scripted struct {
	io.Reader
	sent bytes.Buffer
}

func (s *scripted) Write(p []byte) (int, error) { return s.sent.Write(p) }

// TestQMPCont: qmpCont greets, negotiates and continues, skipping a few
// events; a hostile or broken monitor (no greeting, an error, a line too
// long, garbage, two messages on a line, endless events, an early end)
// fails it with one line.
func TestQMPCont(t *testing.T) {
	greet := `{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": []}}` + "\n"
	ok := `{"return": {}}` + "\n"
	event := `{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "RESUME"}` + "\n"
	for _, tc := range []struct {
		name, script, want string // want "" for success
	}{
		{"plain", greet + ok + ok, ""},
		{"events between", greet + event + ok + event + event + ok, ""},
		{"no greeting", ok + ok + ok, "did not greet"},
		{"error", greet + ok + `{"error": {"class": "GenericError", "desc": "no"}}` + "\n", "QMP cont failed"},
		{"long line", greet + `{"return": "` + strings.Repeat("a", qmpMaxLine) + `"}` + "\n", "longer than"},
		{"garbage", greet + "hello\n", "parsing"},
		{"two messages", greet + `{"return": {}} {"return": {}}` + "\n", "more than one"},
		{"stray bracket", greet + `{"return": {}} ]` + "\n", "more than one"},
		{"stray brace", greet + `{"return": {}}}` + "\n", "more than one"},
		{"trailing blanks", greet + "{\"return\": {}} \t\r\n" + ok, ""},
		{"unknown field", greet + `{"return": {}, "extra": 1}` + "\n", "parsing"},
		{"neither", greet + `{}` + "\n", "neither"},
		{"endless events", greet + strings.Repeat(event, qmpMaxEvents+2), "no reply within"},
		{"early end", greet + ok, "EOF"},
	} {
		p := &scripted{Reader: strings.NewReader(tc.script)}
		err := qmpCont(p)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: qmpCont = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: qmpCont = %v, want one line saying %q", tc.name, err, tc.want)
		}
		if tc.want == "" && p.sent.String() != `{"execute":"qmp_capabilities"}`+"\n"+`{"execute":"cont"}`+"\n" {
			t.Errorf("%s: sent %q, want qmp_capabilities then cont", tc.name, p.sent.String())
		}
	}
}
