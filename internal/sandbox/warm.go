package sandbox

import (
	"context"
	"fmt"
	"strings"
)

// Warmer is a Backend whose box's first exec costs much more than later
// ones and whose box builds compete with a running box for the host's
// CPU: a microVM, whose guest reads the dynamic loader and libc over 9p
// on its first exec and whose boot keeps a CPU busy for a second or more.
// The Manager's pool runs WarmUp in every box it builds before handing it
// out (a one-shot run outside the pool does not pay it), and refills for
// a taken box once its first exec has ended (see pool).
type Warmer interface {
	// WarmUp is the command of the warm-up exec: it must exist in a
	// pooled box's root and exit 0.
	WarmUp() []string
}

// poolWarm is the pool's warm-up for b's boxes, or nil when b is no
// Warmer.
func poolWarm(b Backend) func(context.Context, Box) error {
	w, ok := b.(Warmer)
	if !ok {
		return nil
	}
	argv := w.WarmUp()
	return func(ctx context.Context, box Box) error {
		r, err := box.Exec(ctx, Command{Argv: argv, Timeout: warmTimeout}, Stream{})
		if err == nil && (r.ExitCode != 0 || r.Signal != "" || r.TimedOut) {
			err = fmt.Errorf("exit code %d, signal %q, timed out %v: %s", r.ExitCode, r.Signal, r.TimedOut, stderrPrefix(r.Stderr))
		}
		if err != nil {
			return fmt.Errorf("warming up a pooled sandbox with %q: %w", argv, err)
		}
		return nil
	}
}

// warmStderrMax bounds how much of a failed warm-up's stderr, which a
// broken root writes, goes into the pool's error.
const warmStderrMax = 200

// stderrPrefix is stderr's first line, at most warmStderrMax bytes.
func stderrPrefix(stderr string) string {
	line, _, cut := strings.Cut(strings.TrimSpace(stderr), "\n")
	if len(line) > warmStderrMax {
		line, cut = line[:warmStderrMax], true
	}
	if cut {
		line += " ..."
	}
	return line
}
