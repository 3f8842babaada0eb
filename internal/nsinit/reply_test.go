package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// eventLines are lines an agent could send, with what the host must make
// of them: "" for a valid event, else part of the error.
var eventLines = []struct {
	name, line string
	first      bool
	want       string
}{
	{"ready", `{"kind":"ready"}`, true, ""},
	{"failed", `{"kind":"failed","status":{"exit_code":0,"signal":0,"error":"mounting /proc: EPERM"}}`, true, ""},
	{"started", `{"kind":"started","id":3,"pid":42}`, false, ""},
	{"exited", `{"kind":"exited","id":3,"status":{"exit_code":137,"signal":9},"cpu_time_us":5,"max_rss_kib":1024}`, false, ""},
	{"start failure", `{"kind":"exited","id":3,"status":{"exit_code":127,"signal":0,"start_failed":true,"error":"no such file"}}`, false, ""},
	{"exited without a status", `{"kind":"exited","id":1}`, false, "exited event without a status"},
	{"exited with a null status", `{"kind":"exited","id":1,"status":null}`, false, "exited event without a status"},
	{"exited without an id", `{"kind":"exited","status":{"exit_code":0}}`, false, "exited event without an id"},
	{"exited with a pid", `{"kind":"exited","id":1,"pid":5,"status":{"exit_code":0}}`, false, "exited event with a pid"},
	{"largest figures", `{"kind":"exited","id":1,"status":{"exit_code":0},"cpu_time_us":9223372036854775,"max_rss_kib":9007199254740991}`, false, ""},
	{"cpu time past nanoseconds", `{"kind":"exited","id":1,"status":{"exit_code":0},"cpu_time_us":9223372036854776}`, false, "cpu_time_us 9223372036854776 is not 0-9223372036854775"},
	{"rss past bytes", `{"kind":"exited","id":1,"status":{"exit_code":0},"max_rss_kib":9007199254740992}`, false, "max_rss_kib 9007199254740992 is not 0-9007199254740991"},
	{"negative cpu", `{"kind":"exited","id":1,"status":{"exit_code":0},"cpu_time_us":-1}`, false, "cpu_time_us -1 is not 0-"},
	{"negative rss", `{"kind":"exited","id":1,"status":{"exit_code":0},"max_rss_kib":-1}`, false, "max_rss_kib -1 is not 0-"},
	{"exit code past a byte", `{"kind":"exited","id":1,"status":{"exit_code":256}}`, false, "exit code 256 is not 0-255"},
	{"negative exit code", `{"kind":"exited","id":1,"status":{"exit_code":-1}}`, false, "exit code -1"},
	{"signal past 64", `{"kind":"exited","id":1,"status":{"exit_code":193,"signal":65}}`, false, "signal 65"},
	{"signal code mismatch", `{"kind":"exited","id":1,"status":{"exit_code":0,"signal":9}}`, false, "is not 128+9"},
	{"start failure exiting 0", `{"kind":"exited","id":1,"status":{"exit_code":0,"start_failed":true,"error":"x"}}`, false, "start failure must have"},
	{"start failure without a reason", `{"kind":"exited","id":1,"status":{"exit_code":127,"start_failed":true}}`, false, "start failure must have"},
	{"started pid 1", `{"kind":"started","id":1,"pid":1}`, false, "pid 1 is not 2-4194303"},
	{"started at the highest pid", `{"kind":"started","id":1,"pid":4194303}`, false, ""},
	{"started pid PID_MAX_LIMIT", `{"kind":"started","id":1,"pid":4194304}`, false, "pid 4194304 is not 2-4194303"},
	{"started without an id", `{"kind":"started","pid":5}`, false, "started event without an id"},
	{"started with figures", `{"kind":"started","id":1,"pid":5,"cpu_time_us":3}`, false, "started event with a status or figures"},
	{"started pid past pid_max", `{"kind":"started","id":1,"pid":4194305}`, false, "is not 2-"},
	{"started with a status", `{"kind":"started","id":1,"pid":5,"status":{"exit_code":0}}`, false, "started event with a status"},
	{"started with oom kills", `{"kind":"started","id":1,"pid":5,"oom_kills":3}`, false, ""},
	{"exited at the most oom kills", `{"kind":"exited","id":1,"status":{"exit_code":137,"signal":9},"oom_kills":4294967296}`, false, ""},
	{"exited past the most oom kills", `{"kind":"exited","id":1,"status":{"exit_code":137,"signal":9},"oom_kills":4294967297}`, false, "oom_kills 4294967297 is more than 4294967296"},
	{"started past the most oom kills", `{"kind":"started","id":1,"pid":5,"oom_kills":18446744073709551615}`, false, "oom_kills 18446744073709551615 is more than"},
	{"negative oom kills", `{"kind":"started","id":1,"pid":5,"oom_kills":-1}`, false, "cannot unmarshal"},
	{"ready with oom kills", `{"kind":"ready","oom_kills":1}`, true, "ready event with fields"},
	{"failed with oom kills", `{"kind":"failed","oom_kills":1,"status":{"exit_code":0,"error":"x"}}`, true, "failed event with an id, a pid or figures"},
	{"ready twice", `{"kind":"ready"}`, false, "out of turn"},
	{"started before ready", `{"kind":"started","id":1,"pid":5}`, true, "out of turn"},
	{"ready with fields", `{"kind":"ready","id":4}`, true, "ready event with fields"},
	{"failed without a reason", `{"kind":"failed"}`, true, "failed event without a reason"},
	{"failed with an id", `{"kind":"failed","id":2,"status":{"exit_code":0,"error":"x"}}`, true, "failed event with an id"},
	{"unknown kind", `{"kind":"hello"}`, false, "unknown event"},
	{"unknown field", `{"kind":"started","id":1,"pid":5,"extra":1}`, false, `unknown field "extra"`},
	{"wrong type", `{"kind":"started","id":"1","pid":5}`, false, "cannot unmarshal"},
	{"negative id", `{"kind":"started","id":-1,"pid":5}`, false, "cannot unmarshal"},
	{"two values", `{"kind":"ready"} {"kind":"ready"}`, true, "more than one JSON value"},
	{"not json", "\x00\xff garbage", false, "invalid character"},
	{"empty", "", false, "EOF"},
	{"null", "null", false, "unknown event"},
	{"long unknown field", `{"kind":"ready","` + strings.Repeat(`\u001b`, 5000) + `":1}`, true, `unknown field "\x1b\x1b`},
	{"refusal after ready", `{"refused":true,"kind":"failed","exit_code":125,"error":"x","status":{"exit_code":125,"error":"x"}}`, false, `unknown field "refused"`},
}

func TestParseEvent(t *testing.T) {
	for _, tt := range eventLines {
		e, err := ParseEvent([]byte(tt.line+"\n"), tt.first)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: ParseEvent(%q) = %v, want a valid event", tt.name, tt.line, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: ParseEvent(%q) = %+v, %v, want an error containing %q", tt.name, tt.line, e, err, tt.want)
		case tt.want != "" && !errors.Is(err, ErrProtocol):
			t.Errorf("%s: ParseEvent(%q) = %v, which does not match ErrProtocol", tt.name, tt.line, err)
		case err != nil && (len(err.Error()) > 300 || strings.ContainsAny(err.Error(), "\x1b\n")):
			t.Errorf("%s: ParseEvent() error of %d bytes %.80q, want one short line without the sandbox's control bytes", tt.name, len(err.Error()), err)
		}
	}
}

// TestRefusal checks that a Refusal reads as one for this host, and as a
// failure with its reason for a host from before versioning, which reads
// a Status or an Event with plain json.Unmarshal.
func TestRefusal(t *testing.T) {
	const why = "warden-init speaks protocol version 3 but warden sent version 2: reinstall warden-init from the same build as warden"
	line, err := json.Marshal(NewRefusal(why))
	if err != nil {
		t.Fatal(err)
	}
	want := "warden-init refused the sandbox: " + why
	var refused *refusedError
	if _, err := parseStatus(line); !errors.As(err, &refused) || err.Error() != want {
		t.Errorf("parseStatus(refusal) = %v, want %q", err, want)
	}
	if _, err := ParseEvent(line, true); !errors.As(err, &refused) || err.Error() != want {
		t.Errorf("ParseEvent(refusal) = %v, want %q", err, want)
	}
	var st Status
	if err := json.Unmarshal(line, &st); err != nil || st.Error != why || st.ExitCode != 125 {
		t.Errorf("an older host reads the refusal as Status %+v (%v), want exit code 125 and the reason", st, err)
	}
	var e Event
	if err := json.Unmarshal(line, &e); err != nil || e.Kind != EventFailed || e.Status == nil || e.Status.Error != why {
		t.Errorf("an older host reads the refusal as Event %+v (%v), want failed with the reason", e, err)
	}
}

func TestReadStatus(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"exit", `{"exit_code":3,"signal":0}` + "\n", ""},
		{"killed before answering", "", "EOF"},
		{"cut short", `{"exit_code":3`, "EOF"},
		{"unknown field", `{"exit_code":3,"pid":1}` + "\n", `unknown field "pid"`},
		{"bad exit code", `{"exit_code":1000}` + "\n", "exit code 1000"},
		{"too long", strings.Repeat(" ", maxStatusLine+1) + "{}\n", "longer than"},
	}
	for _, tt := range tests {
		_, err := ReadStatus(strings.NewReader(tt.in))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: ReadStatus() = %v, want a status", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: ReadStatus() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// TestSilentExit: the codes an init of another build exits with are
// explained with the advice; any other end is not.
func TestSilentExit(t *testing.T) {
	tests := []struct {
		code int
		want string
	}{
		{111, "reinstall warden-init"},
		{112, "refused its configuration"},
		{1, ""},
		{-1, ""},
	}
	for _, tt := range tests {
		if got := SilentExit(tt.code); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("SilentExit(%d) = %q, want it to contain %q", tt.code, got, tt.want)
		}
	}
}

// FuzzParseEvent feeds the host's reader of agent events anything: it
// must never panic, and an event it accepts must be whole for its kind.
func FuzzParseEvent(f *testing.F) {
	for _, tt := range eventLines {
		f.Add([]byte(tt.line), tt.first)
	}
	f.Fuzz(func(t *testing.T, line []byte, first bool) {
		e, err := ParseEvent(line, first)
		if err != nil {
			var refused *refusedError
			if !errors.Is(err, ErrProtocol) && !errors.As(err, &refused) {
				t.Fatalf("ParseEvent(%q) = %v, neither a protocol error nor a refusal", line, err)
			}
			return
		}
		if e.validate(first) != nil || (e.Kind == EventExited || e.Kind == EventFailed) && e.Status == nil {
			t.Fatalf("ParseEvent(%q) accepted %+v", line, e)
		}
	})
}

// FuzzReadStatus does the same for the one-shot init's status line.
func FuzzReadStatus(f *testing.F) {
	f.Add([]byte(`{"exit_code":3,"signal":0}` + "\n"))
	f.Add([]byte(`{"exit_code":137,"signal":9}` + "\n"))
	f.Add([]byte(`{"exit_code":127,"start_failed":true,"error":"x"}` + "\n"))
	f.Add([]byte(`{"refused":true,"kind":"failed","exit_code":125,"error":"x","status":{"exit_code":125,"error":"x"}}` + "\n"))
	f.Add([]byte(`{"exit_code":3`))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, err := ReadStatus(strings.NewReader(string(in)))
		if err != nil {
			var refused *refusedError
			if !errors.Is(err, ErrProtocol) && !errors.As(err, &refused) && !errors.Is(err, io.EOF) {
				t.Fatalf("ReadStatus(%q) = %v, not a protocol error, a refusal or EOF", in, err)
			}
			return
		}
		if st.validate() != nil {
			t.Fatalf("ReadStatus(%q) accepted %+v", in, st)
		}
	})
}

// TestBoxTextBounded: a reason or error from the box reaches the host's
// errors and results cut to maxBoxText bytes, its control characters
// quoted, whichever message carries it.
func TestBoxTextBounded(t *testing.T) {
	long := strings.Repeat("\x1b[2J\n", 2000)
	js, _ := json.Marshal(long)
	tests := []struct {
		name string
		got  func() string
	}{
		{"refusal", func() string {
			_, err := parseStatus([]byte(`{"refused":true,"kind":"failed","exit_code":125,"error":` + string(js) + `,"status":null}`))
			return fmt.Sprint(err)
		}},
		{"failed event", func() string {
			e, err := ParseEvent([]byte(`{"kind":"failed","status":{"exit_code":0,"error":`+string(js)+`}}`), true)
			if err != nil {
				return err.Error()
			}
			return e.Status.Error
		}},
		{"start failure", func() string {
			e, err := ParseEvent([]byte(`{"kind":"exited","id":1,"status":{"exit_code":127,"start_failed":true,"error":`+string(js)+`}}`), false)
			if err != nil {
				return err.Error()
			}
			return e.Status.Error
		}},
		{"one-shot status", func() string {
			st, err := parseStatus([]byte(`{"exit_code":0,"error":` + string(js) + `}`))
			if err != nil {
				return err.Error()
			}
			return st.Error
		}},
	}
	for _, tt := range tests {
		got := tt.got()
		if len(got) > maxBoxText+len("warden-init refused the sandbox: ...") || strings.ContainsAny(got, "\x1b\n") || !strings.Contains(got, `\x1b[2J\x0a`) || !strings.HasSuffix(got, "...") {
			t.Errorf("%s: got %d bytes %.80q, want at most %d with control characters quoted and cut with ...", tt.name, len(got), got, maxBoxText)
		}
	}
}

// TestBoxTextQuotesWhatDoesNotPrint: a box's text reaches errors and logs
// with every rune that does not print quoted, C1 controls and bidi
// overrides too, which could disguise the rest of a line.
func TestBoxTextQuotesWhatDoesNotPrint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, é ok", "plain text, é ok"},
		{"\x1b[2J\n", `\x1b[2J\x0a`},
		{"a\u009bb", `a\u009bb`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"line\u2028break", `line\u2028break`},
		{"tag\U000E0041", `tag\U000e0041`},
	}
	for _, tt := range tests {
		if got := boxText(tt.in); got != tt.want {
			t.Errorf("boxText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestEndedCause: each exit status of the agent that names its box's end
// maps to its own error, so the host tells the sandbox's code killing its
// agent from Warden failing to lock it down; other statuses name none.
func TestEndedCause(t *testing.T) {
	tests := []struct {
		code int
		want error
	}{
		{ExitUserAgentDied, ErrAgentKilled},
		{ExitAgentUnlocked, ErrAgentUnlocked},
		{0, nil},
		{exitNoHost, nil},
		{137, nil},
	}
	for _, tt := range tests {
		if got := EndedCause(tt.code); got != tt.want { //nolint:errorlint // EndedCause returns the sentinels themselves, and the test holds it to exactly that
			t.Errorf("EndedCause(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
}
