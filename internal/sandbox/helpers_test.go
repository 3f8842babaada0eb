package sandbox

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestLimitedStreamsWhatItKeeps: a stream carries exactly the bytes the
// Result keeps, and Full says when that is all.
func TestLimitedStreamsWhatItKeeps(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		writes    []string
		want      string
		truncated bool
		full      bool
	}{
		{"under", 10, []string{"hel", "lo"}, "hello", false, false},
		{"exact", 5, []string{"hel", "lo"}, "hello", false, true},
		{"over in one write", 3, []string{"hello"}, "hel", true, true},
		{"over across writes", 4, []string{"hel", "lo", "world"}, "hell", true, true},
		{"no limit", 0, []string{"hello", "world"}, "helloworld", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var live bytes.Buffer
			l := &limited{max: tt.max, live: &live}
			for _, w := range tt.writes {
				if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if got := l.String(); got != tt.want {
				t.Errorf("kept %q, want %q", got, tt.want)
			}
			if got := live.String(); got != tt.want {
				t.Errorf("streamed %q, want %q (exactly what is kept)", got, tt.want)
			}
			if l.truncated != tt.truncated || l.Full() != tt.full {
				t.Errorf("truncated %v full %v, want %v %v", l.truncated, l.Full(), tt.truncated, tt.full)
			}
		})
	}
}

// TestLanguagesAccepted: every language interp knows is accepted for a
// one-shot run and a session exec, and another is refused with an error
// that names them all.
func TestLanguagesAccepted(t *testing.T) {
	for _, lang := range interp.Languages() {
		req := ExecRequest{Language: lang, Code: "1"}
		if err := validateExec(req); err != nil {
			t.Errorf("validateExec(language %q) = %v, want nil", lang, err)
		}
		argv, _, err := oneShotCommand(req, nil)
		if err != nil || len(argv) < 2 || argv[len(argv)-1] != "1" {
			t.Errorf("oneShotCommand(language %q) = %q, %v; want the interpreter given the code", lang, argv, err)
		}
	}
	_, env, err := oneShotCommand(ExecRequest{Language: "python", Code: "1"}, []string{"A=1"})
	if want := []string{"A=1", "MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8"}; err != nil || !slices.Equal(env, want) {
		t.Errorf("oneShotCommand(python) env = %q, %v; want %q, as a session's python gets", env, err, want)
	}
	bad := ExecRequest{Language: "cobol", Code: "1"}
	for name, err := range map[string]error{"validateExec": validateExec(bad), "oneShotCommand": third(oneShotCommand(bad, nil))} {
		if !errors.Is(err, spec.ErrInvalid) || !errors.Is(err, interp.ErrUnknownLanguage) || !strings.Contains(err.Error(), strings.Join(interp.Languages(), ", ")) {
			t.Errorf("%s(language cobol) = %v, want ErrInvalid and ErrUnknownLanguage naming %v", name, err, interp.Languages())
		}
	}
}

// third is f's error, to test a call's error in an expression.
func third[T, U any](_ T, _ U, err error) error { return err }

// withMemory is a Fork's default options, as a request without
// "memory" asks: the source's memory where it can be had.
var withMemory = ForkOptions{Memory: true}
