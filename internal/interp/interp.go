// Package interp runs code in persistent language interpreters inside a
// sandbox, the way a notebook runs cells: variables, imports and the working
// directory survive from one run to the next, and each run reports the value
// of its trailing expression, the exception it raised and the rich outputs
// (charts, HTML tables) it produced.
//
// The interpreter process lives inside the sandbox and is started through a
// Spawner; this package is the host side. It talks to a small driver program
// over two pipes (requests on the child's descriptor 3, replies on 4) and
// reads the user's output from descriptors 1 and 2 until a per-run token
// shows that the run's output is complete.
//
// The driver runs the sandbox's code, so the host treats every reply as
// hostile: it checks each field and bounds what it keeps of one run,
// however many replies come and however long they are.
//
// One session is one trust domain. Its execs and interpreters run as one
// user in one sandbox, so one exec may affect another's interpreter (the
// Python driver makes itself non-dumpable, so other processes cannot reach
// its pipes through /proc or ptrace, but bash and Node.js have no portable
// way to), never the host or other sessions.
package interp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Interpreter is one persistent interpreter in one sandbox. It starts its
// process on the first Run, so a session that never uses a language pays
// nothing for it, and starts a fresh one on the Run after the process died.
// Runs are serialised: a Run waits for the one before it.
type Interpreter interface {
	// Run executes code and returns what it did. The code's stdout and
	// stderr are written to the writers as they arrive (either may be nil
	// to drop them); every byte of this run's output has been written when
	// Run returns, and none is written after. When ctx ends first, the
	// interpreter is killed and the Outcome says so. The error is only for
	// Warden's own failures (the interpreter cannot start, its protocol
	// broke); code that fails is a normal Outcome. A writer with a
	// `Full() bool` method that reports true keeps no more: from then on
	// that stream is read only to find the run's end, in large pieces at
	// the sandbox's pace (see package drain; the quota WithCPUs gives), so
	// a flood costs the host little and the interpreter waits on its full
	// pipe between reads.
	Run(ctx context.Context, code string, stdout, stderr io.Writer) (Outcome, error)
	// Close kills the interpreter and everything it started. Runs after
	// Close fail with ErrClosed.
	Close() error
}

// Outcome is what one Run did.
type Outcome struct {
	// Value is the repr of the code's trailing expression, as a notebook
	// shows it; empty when the code ends in a statement or the value is
	// None (undefined in JavaScript).
	Value string
	// Exception is the error the code raised, if any.
	Exception *spec.Exception
	// Outputs are the rich results in the order the code produced them.
	Outputs []spec.Output
	// Restarted says the interpreter died or was killed during this run
	// (timeout, crash, exit, the memory limit): its state is gone and the
	// next Run starts a fresh one.
	Restarted bool
	// Started says this run started a new interpreter process (the first
	// run, or the first after a death), whether or not it came up: a start
	// costs the host a spawn, pipes and a handshake, several times what a
	// run in a live interpreter costs, so callers that charge for runs
	// charge it.
	Started bool
	// TimedOut says ctx's deadline passed and the interpreter was killed.
	TimedOut bool
	// ExitCode is the status of the last command for bash, or the
	// interpreter's exit status (128+N for signal N) when it died.
	ExitCode int
	// Signal is the signal that killed the interpreter, or 0.
	Signal int
}

// Errors New and Run return, for callers to tell apart without matching
// strings.
var (
	// ErrUnknownLanguage: New was asked for a language this package has no
	// driver for.
	ErrUnknownLanguage = errors.New("unknown language")
	// ErrClosed: the Interpreter was closed.
	ErrClosed = errors.New("interpreter closed")
	// ErrProtocol: the driver broke the protocol; the interpreter was
	// killed and the next Run starts a fresh one.
	ErrProtocol = errors.New("interpreter protocol error")
)

// Limits bound what one run may send back, so a runaway cell cannot make
// the host hold unbounded memory.
const (
	// DefaultMaxOutputBytes caps one rich output (its encoded data).
	DefaultMaxOutputBytes = 8 << 20
	// DefaultMaxTotalOutputBytes caps all rich outputs of one run: their
	// data, their MIME types and 64 bytes for each.
	DefaultMaxTotalOutputBytes = 32 << 20
	// DefaultMaxValueBytes caps the Value and each Exception field.
	DefaultMaxValueBytes = 1 << 20
)

// config is what the options set.
type config struct {
	maxOutput      int
	maxTotalOutput int
	maxValue       int
	dir            string
	root           string
	cpus           float64
}

// Option changes how New builds an Interpreter.
type Option func(*config)

// WithMaxOutputBytes caps the encoded size of one rich output; larger ones
// are dropped with a note on stderr. Zero or less keeps the default.
func WithMaxOutputBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxOutput = n
		}
	}
}

// WithMaxTotalOutputBytes caps the size of all rich outputs of one run
// (encoded data, MIME type and 64 bytes for each output); outputs past it
// are dropped with a note on stderr. Zero or less keeps the default.
func WithMaxTotalOutputBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxTotalOutput = n
		}
	}
}

// WithMaxValueBytes caps the Value and the Exception's message and
// traceback, which are cut with a note. Zero or less keeps the default.
func WithMaxValueBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxValue = n
		}
	}
}

// WithRoot says the sandbox runs on the template's root tree at dir
// (spec.Root.Dir), where New looks for the interpreter; empty (the
// default) is the host's root.
func WithRoot(dir string) Option {
	return func(c *config) { c.root = dir }
}

// WithDir sets the interpreter's working directory inside the sandbox;
// empty (the default) means the spawner's default, /workspace.
func WithDir(dir string) Option {
	return func(c *config) { c.dir = dir }
}

// WithCPUs gives the CPU quota in cores of the sandbox the interpreter
// runs in, which sets the pace at which its output nobody keeps is read
// (see package drain): a sandbox given less than a core is read more slowly,
// so what its floods cost the host stays a share of its quota. Zero or
// less (the default) means unknown, paced as one core.
func WithCPUs(cpus float64) Option {
	return func(c *config) { c.cpus = max(cpus, 0) }
}

// Adopt returns an Interpreter for language, as New does, whose first
// process is id, a driver of that language that a checkpointed session
// started and its restored sandbox still runs, taken over through ad:
// Runs talk to it, its variables as they were at the checkpoint; should
// it die, the next Run starts a fresh one through sp. The process must
// have been started by an Interpreter of the same language and options:
// nothing here can tell, and a driver of another language runs the code
// it is sent as its own language would (a Python driver answers
// JavaScript with a SyntaxError outcome, not an error), so the caller
// must take the language from its own record of the checkpoint.
func Adopt(language string, sp Spawner, ad Adopter, id uint64, env []string, opts ...Option) (Interpreter, error) {
	in, err := New(language, sp, env, opts...)
	if err != nil {
		return nil, err
	}
	it := in.(*interpreter)
	p, err := adopt(it.lang, ad, id, it.cfg)
	if err != nil {
		return nil, err
	}
	it.mu.Lock()
	it.cur = p
	it.mu.Unlock()
	return it, nil
}

// New returns an Interpreter for language whose processes sp starts with
// env (the sandbox environment, KEY=VALUE). Nothing starts until the first
// Run. It fails with ErrUnknownLanguage for a language this package does
// not know, and with errors.ErrUnsupported when the sandbox's root (the
// host's, or a template's with WithRoot) has no interpreter for it.
func New(language string, sp Spawner, env []string, opts ...Option) (Interpreter, error) {
	lang, ok := lookup(language)
	if !ok {
		return nil, UnknownError(language)
	}
	if sp == nil {
		return nil, fmt.Errorf("%s interpreter: no spawner", language)
	}
	cfg := config{
		maxOutput:      DefaultMaxOutputBytes,
		maxTotalOutput: DefaultMaxTotalOutputBytes,
		maxValue:       DefaultMaxValueBytes,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if !lang.availableIn(cfg.root) {
		where := "the host's root"
		if cfg.root != "" {
			where = "the template's root"
		}
		return nil, fmt.Errorf("%s interpreter: %s not found in %s (%s): %w", language, lang.program, where, strings.Join(lang.hostPaths, ", "), errors.ErrUnsupported)
	}
	return newInterpreter(lang, sp, env, cfg), nil
}
