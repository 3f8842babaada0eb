package sandbox

import (
	"bytes"
	"io"
	"sort"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
)

// limited keeps the first max bytes written (zero: no limit) and passes
// exactly those on to live, so a stream carries what the Result keeps; it
// never fails a write, so output past the limit never stops the program.
// Once it is Full, the interpreter reads the rest only to find the run's
// end, at a pace (interp.Interpreter.Run).
type limited struct {
	max       int64
	live      io.Writer
	buf       bytes.Buffer
	truncated bool
}

func (l *limited) Write(p []byte) (int, error) {
	keep := p
	if l.max > 0 {
		room := l.max - int64(l.buf.Len())
		if int64(len(keep)) > room {
			keep, l.truncated = keep[:max(room, 0)], true
		}
	}
	if len(keep) == 0 {
		return len(p), nil
	}
	l.buf.Write(keep)
	if l.live != nil {
		if _, err := l.live.Write(keep); err != nil {
			l.live = nil
		}
	}
	return len(p), nil
}

// Full says whether l keeps nothing more.
func (l *limited) Full() bool { return l.max > 0 && int64(l.buf.Len()) >= l.max }

func (l *limited) String() string { return l.buf.String() }

func readerOrNil(b []byte) io.Reader {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}

func sortInfos(infos []Info) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].CreatedAt.Before(infos[j].CreatedAt) })
}

// oneShotCommand is the command a one-shot run of req executes, and its
// environment env: the command itself, or the language's interpreter given
// the code, with the language's defaults for keys env lacks.
func oneShotCommand(req ExecRequest, env []string) (argv, withDefaults []string, err error) {
	if err := validateExec(ExecRequest{Command: req.Command, Language: req.Language, Code: req.Code, Timeout: req.Timeout}); err != nil {
		return nil, nil, err
	}
	if len(req.Command) > 0 {
		return req.Command, env, nil
	}
	// validateExec has refused an unknown language.
	return interp.OneShotArgv(req.Language, req.Code, env)
}

// ms is d in milliseconds, as Result's times are.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
