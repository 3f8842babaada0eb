package interp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// interpreter implements Interpreter for any language.
type interpreter struct {
	lang *language
	sp   Spawner
	env  []string
	cfg  config
	sem  chan struct{} // held by the one Run (or Close) at work

	mu     sync.Mutex
	cur    *proc // nil until the first Run and after a death
	closed bool
}

func newInterpreter(lang *language, sp Spawner, env []string, cfg config) *interpreter {
	return &interpreter{lang: lang, sp: sp, env: append([]string(nil), env...), cfg: cfg, sem: make(chan struct{}, 1)}
}

// Run implements Interpreter. A ctx that has ended before the run could
// start (an earlier Run still held the interpreter) returns a TimedOut
// Outcome, on a deadline, without touching the interpreter.
func (it *interpreter) Run(ctx context.Context, code string, stdout, stderr io.Writer) (Outcome, error) {
	select {
	case it.sem <- struct{}{}:
	case <-ctx.Done():
		return Outcome{TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}, nil
	}
	defer func() { <-it.sem }()
	if ctx.Err() != nil {
		return Outcome{TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}, nil
	}

	it.mu.Lock()
	p, closed := it.cur, it.closed
	it.mu.Unlock()
	if closed {
		return Outcome{}, ErrClosed
	}
	started := p == nil
	if started {
		var err error
		if p, err = it.startProc(ctx); err != nil {
			if ctx.Err() != nil {
				return Outcome{TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded), Restarted: true, Started: true}, nil
			}
			return Outcome{Started: true}, fmt.Errorf("starting %s: %w", it.lang.name, err)
		}
	}
	o, err := it.exec(ctx, p, code, stdout, stderr)
	o.Started = started
	if o.Restarted {
		it.drop(p)
	}
	if err != nil {
		return o, fmt.Errorf("running %s: %w", it.lang.name, err)
	}
	return o, nil
}

// startProc starts a process and waits until its driver is ready.
func (it *interpreter) startProc(ctx context.Context) (*proc, error) {
	p, err := start(ctx, it.lang, it.sp, it.env, it.cfg)
	if err != nil {
		return nil, err
	}
	it.mu.Lock()
	closed := it.closed
	if !closed {
		it.cur = p
	}
	it.mu.Unlock()
	if closed {
		p.stop()
		return nil, ErrClosed
	}
	if err := p.ready(ctx); err != nil {
		it.drop(p)
		it.mu.Lock()
		closed = it.closed
		it.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return nil, err
	}
	return p, nil
}

// drop forgets a dead (or doomed) process so the next Run starts afresh.
func (it *interpreter) drop(p *proc) {
	it.mu.Lock()
	if it.cur == p {
		it.cur = nil
	}
	it.mu.Unlock()
	p.stop()
}

// Close implements Interpreter: it kills the process at once, so a Run in
// progress ends with Restarted, then waits for that Run to return.
func (it *interpreter) Close() error {
	it.mu.Lock()
	if it.closed {
		it.mu.Unlock()
		return nil
	}
	it.closed = true
	p := it.cur
	it.mu.Unlock()
	if p != nil {
		p.kill()
	}
	it.sem <- struct{}{}
	defer func() { <-it.sem }()
	it.mu.Lock()
	p, it.cur = it.cur, nil
	it.mu.Unlock()
	if p != nil {
		p.stop()
	}
	return nil
}

// Bounds on what one run keeps of its replies besides the configured caps,
// so no number or size of replies makes the host hold more.
const (
	// maxNotes caps the notes of one run; later ones are only counted.
	maxNotes = 16
	// maxMime is the longest MIME type an output may have.
	maxMime = 255
	// mimePunct are the characters besides letters and digits a MIME type
	// and subtype may hold (RFC 6838 restricted names).
	mimePunct = "!#$&^_.+-"
	// outputCost is what each kept output counts against the run's total
	// besides its data and MIME type, so that empty outputs add up too.
	outputCost = 64
	// excerptLen is how much of a string from the driver a note or an
	// error quotes.
	excerptLen = 64
	// maxReplies caps the replies of one run. Code in the sandbox can
	// write to the reply pipe, and each line costs the host a decode
	// (some microseconds) for a few bytes the writer hardly pays for, so
	// past this many the driver is taken for broken and killed.
	maxReplies = 10000
)

// run is the state of one Run: what came back so far, within the caps.
type run struct {
	cfg   config
	o     Outcome
	total int
	// notes say what Warden dropped; they go to the run's stderr at its
	// end, after the stream itself, so the writer never has two writers.
	// Past maxNotes they are only counted in more.
	notes []string
	more  int
	// replies counts the replies taken, up to maxReplies.
	replies int
}

// exec sends code to a ready process and gathers the run: rich outputs as
// they come, the "done" reply, and the token on both output streams.
func (it *interpreter) exec(ctx context.Context, p *proc, code string, stdout, stderr io.Writer) (Outcome, error) {
	token := newToken()
	outDone := p.stdout.arm(token, stdout)
	errDone := p.stderr.arm(token, stderr)
	r := &run{cfg: it.cfg}
	req := request{Code: code, Token: token, MaxOutput: it.cfg.maxOutput, MaxValue: it.cfg.maxValue}
	err := r.wait(ctx, p, it.lang.send, req, outDone, errDone)
	p.stdout.disarm()
	p.stderr.disarm()
	if stderr != nil {
		r.writeNotes(stderr)
	}
	return r.o, err
}

// wait sends the request and waits for the end of the run, or of the
// interpreter.
func (r *run) wait(ctx context.Context, p *proc, send func(io.Writer, request) error, req request, outDone, errDone <-chan struct{}) error {
	sent := make(chan error, 1)
	go func() { sent <- send(p.ctl, req) }()
	done := false
	for !done || outDone != nil || errDone != nil {
		select {
		case <-ctx.Done():
			r.o.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
			r.died(p)
			return nil
		case <-p.exited:
			r.died(p)
			return nil
		case err := <-sent:
			sent = nil
			if err != nil {
				r.died(p)
				return nil
			}
		case rep, ok := <-p.replies:
			if !ok {
				r.died(p)
				return nil
			}
			if !r.count() {
				r.died(p)
				return fmt.Errorf("%w: more than %d replies in one run", ErrProtocol, maxReplies)
			}
			if rep.T == "done" {
				// The driver wrote the tokens before this reply.
				done = true
				p.stdout.hurry()
				p.stderr.hurry()
			}
			if err := r.take(rep); err != nil {
				r.died(p)
				return err
			}
		case <-outDone:
			outDone = nil
		case <-errDone:
			errDone = nil
		}
	}
	return nil
}

// count counts one more reply and says whether the run may take it.
func (r *run) count() bool {
	if r.replies >= maxReplies {
		return false
	}
	r.replies++
	return true
}

// take applies one reply to the run.
func (r *run) take(rep reply) error {
	if rep.err != nil {
		return fmt.Errorf("%w: a reply that does not decode: %s", ErrProtocol, excerpt(rep.err.Error()))
	}
	switch rep.T {
	case "done":
		if rep.ExitCode < 0 || rep.ExitCode > 255 {
			return fmt.Errorf("%w: exit code %d is not 0-255", ErrProtocol, rep.ExitCode)
		}
		r.finish(rep)
	case "output":
		r.output(rep)
	case "dropped":
		r.note("a reply of %d bytes was dropped (over the limit of %d)", rep.size, maxReplyLine(r.cfg))
	default:
		return fmt.Errorf("%w: unexpected reply %s", ErrProtocol, excerpt(rep.T))
	}
	return nil
}

// finish applies the "done" reply. The drivers cut long values with a
// note of their own; the host only guards against a driver that did not.
func (r *run) finish(rep reply) {
	if rep.size > 0 {
		r.note("the value and exception were dropped: their reply of %d bytes is over the limit of %d", rep.size, maxReplyLine(r.cfg))
	}
	n := r.cfg.maxValue + 256
	r.o.Value = clip(rep.Value, n)
	if rep.Exc != nil {
		r.o.Exception = &spec.Exception{
			Type:      clip(rep.Exc.Type, n),
			Message:   clip(rep.Exc.Message, n),
			Traceback: clip(rep.Exc.Traceback, n),
		}
	}
	r.o.ExitCode = rep.ExitCode
}

// output keeps one rich output if it is well formed and fits the caps.
// Each output counts its data, its MIME type and outputCost against the
// run's total.
func (r *run) output(rep reply) {
	enc, encOK := encoding(rep.Enc)
	n := len(rep.Data)
	cost := n + len(rep.Mime) + outputCost
	switch {
	case !validMime(rep.Mime):
		r.note("an output with the invalid MIME type %s dropped", excerpt(rep.Mime))
	case !encOK:
		r.note("%s output with the unknown encoding %s dropped", rep.Mime, excerpt(rep.Enc))
	case n > r.cfg.maxOutput:
		r.note("%s output of %d bytes dropped (limit %d)", rep.Mime, n, r.cfg.maxOutput)
	case r.total+cost > r.cfg.maxTotalOutput:
		r.note("%s output of %d bytes dropped (outputs of this run are limited to %d bytes)", rep.Mime, n, r.cfg.maxTotalOutput)
	default:
		r.total += cost
		r.o.Outputs = append(r.o.Outputs, spec.Output{MimeType: rep.Mime, Data: rep.Data, Encoding: enc})
	}
}

// note records what Warden dropped, or only counts it past maxNotes.
func (r *run) note(format string, args ...any) {
	if len(r.notes) >= maxNotes {
		r.more++
		return
	}
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// writeNotes writes the run's notes to w, one line each.
func (r *run) writeNotes(w io.Writer) {
	for _, n := range r.notes {
		// w is the run's stderr capture or a client's stream; a client
		// gone away cannot be told, and the run's result is made anyway.
		_, _ = io.WriteString(w, "warden: "+n+"\n")
	}
	if r.more > 0 {
		_, _ = fmt.Fprintf(w, "warden: +%d more notes\n", r.more) // a client gone away cannot be told
	}
}

// died finishes a run whose interpreter ended (or must end): it kills
// what is left, keeps the output already on its way, and records how the
// process ended. Every wait is bounded.
func (r *run) died(p *proc) {
	p.kill()
	deadline := time.NewTimer(exitGrace)
	defer deadline.Stop()
	replies, exited := p.replies, p.exited
	outEOF, errEOF := p.stdout.eof, p.stderr.eof
	for replies != nil || exited != nil || outEOF != nil || errEOF != nil {
		select {
		case rep, ok := <-replies:
			switch {
			case !ok || !r.count():
				replies = nil
			case rep.T == "output":
				r.output(rep)
			}
		case <-exited:
			exited = nil
		case <-outEOF:
			outEOF = nil
		case <-errEOF:
			errEOF = nil
		case <-deadline.C:
			replies, exited, outEOF, errEOF = nil, nil, nil, nil
		}
	}
	r.o.Restarted = true
	if st, ok := p.wait(); ok {
		r.o.ExitCode, r.o.Signal = st.Code, st.Signal
	}
}

// clip cuts s to at most n bytes, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + fmt.Sprintf("... [%d bytes cut]", len(s)-n)
}

// encoding returns the Output encoding enc names, as the package's own
// constant, and whether it is one.
func encoding(enc string) (string, bool) {
	switch enc {
	case "base64":
		return "base64", true
	case "utf-8":
		return "utf-8", true
	}
	return "", false
}

// validMime reports whether s looks like a MIME type: type/subtype of
// RFC 6838 name characters, at most maxMime bytes, no parameters.
func validMime(s string) bool {
	typ, sub, ok := strings.Cut(s, "/")
	return ok && len(s) <= maxMime && mimeName(typ) && mimeName(sub)
}

// mimeName reports whether s is a non-empty MIME type or subtype name.
func mimeName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && strings.IndexByte(mimePunct, c) < 0 {
			return false
		}
	}
	return true
}

// excerpt quotes the start of a string from the driver for a note or an
// error: at most excerptLen bytes, control characters escaped.
func excerpt(s string) string {
	if len(s) <= excerptLen {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:excerptLen]), len(s))
}

// newToken returns a random string that marks the end of one run's output;
// no program can print it by chance.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return "\x1e@warden-end-" + hex.EncodeToString(b) + "@"
}
