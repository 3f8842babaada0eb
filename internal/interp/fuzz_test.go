package interp

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// takeAll reads every reply in in, as readReplies does from a driver, and
// applies each to one run under hostileLimits, as a run's wait does.
func takeAll(in []byte) (*run, []error) {
	out := make(chan reply)
	go readReplies(bytes.NewReader(in), maxReplyLine(hostileLimits), out, nil)
	r := &run{cfg: hostileLimits}
	var errs []error
	for rep := range out {
		if err := r.take(rep); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errs
}

// TestReplyChecks: lines no driver sends break the protocol, whatever
// else they hold.
func TestReplyChecks(t *testing.T) {
	tests := []struct {
		name, line string
		want       string
	}{
		{"done", `{"t":"done","value":"1","exit_code":3}`, ""},
		{"output", `{"t":"output","mime":"text/plain","data":"x","enc":"utf-8"}`, ""},
		{"unknown field", `{"t":"done","pid":1}`, `unknown field \"pid\"`},
		{"two values", `{"t":"done"}{"t":"done"}`, "more than one JSON value"},
		{"exit code past a byte", `{"t":"done","exit_code":256}`, "exit code 256 is not 0-255"},
		{"negative exit code", `{"t":"done","exit_code":-1}`, "exit code -1 is not 0-255"},
		{"exit code of the wrong type", `{"t":"done","exit_code":"0"}`, "cannot unmarshal string"},
	}
	for _, tt := range tests {
		_, errs := takeAll([]byte(tt.line + "\n"))
		err := errors.Join(errs...)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: replies %q = %v, want none", tt.name, tt.line, err)
		case tt.want != "" && (!errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: replies %q = %v, want a protocol error containing %q", tt.name, tt.line, err, tt.want)
		}
	}
}

// FuzzReplies feeds the host's reader of interpreter replies anything, as
// a driver taken over by the sandbox's code could: it must never panic,
// every error is a protocol error, and what a run keeps stays bounded.
func FuzzReplies(f *testing.F) {
	f.Add([]byte(`{"t":"ready"}` + "\n" + `{"t":"output","mime":"image/png","data":"aGk=","enc":"base64"}` + "\n" + `{"t":"done","value":"2","exc":null}` + "\n"))
	f.Add([]byte(`{"t":"done","exc":{"type":"E","message":"m","traceback":"t"},"exit_code":1}` + "\n"))
	f.Add([]byte(`{"t":"output","mime":"a/b","data":"` + strings.Repeat("x", 2000) + `","enc":"utf-8"}` + "\n"))
	f.Add([]byte(`{"t":"done","value":"` + strings.Repeat("v", 100000) + `"}` + "\n"))
	f.Add([]byte("\x00\xff\n{\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, errs := takeAll(in)
		for _, err := range errs {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("replies %q: error %v is not a protocol error", in, err)
			}
		}
		res := result{Outcome: r.o}
		if n := kept(res); n > maxKept {
			t.Fatalf("replies %q: the run kept %d bytes, want at most %d", in, n, maxKept)
		}
		if r.o.ExitCode < 0 || r.o.ExitCode > 255 {
			t.Fatalf("replies %q: exit code %d kept", in, r.o.ExitCode)
		}
	})
}
