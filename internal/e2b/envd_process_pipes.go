package e2b

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// procPipes are a process's standard streams: the child's ends for the
// box, the host's here.
type procPipes struct {
	child                 [3]*os.File
	stdin, stdout, stderr *os.File
}

// newProcPipes makes the pipes; without stdin the process reads
// /dev/null, as envd's does when stdin is off.
func newProcPipes(withStdin bool) (*procPipes, error) {
	pp := &procPipes{}
	var err error
	if withStdin {
		pp.child[0], pp.stdin, err = os.Pipe()
	} else {
		pp.child[0], err = os.Open(os.DevNull)
	}
	if err == nil {
		pp.stdout, pp.child[1], err = os.Pipe()
	}
	if err == nil {
		pp.stderr, pp.child[2], err = os.Pipe()
	}
	if err != nil {
		pp.closeChild()
		pp.closeHost()
		return nil, fmt.Errorf("creating a process's pipes: %w", err)
	}
	return pp, nil
}

// closeChild closes the child's ends, which the box has duplicated.
func (pp *procPipes) closeChild() {
	for i, f := range pp.child {
		if f != nil {
			closeLogged(f, "a process's pipe (the child's end)")
			pp.child[i] = nil
		}
	}
}

// closeHost closes the host's ends of a process that did not start.
func (pp *procPipes) closeHost() {
	for _, f := range []*os.File{pp.stdin, pp.stdout, pp.stderr} {
		if f != nil {
			closeLogged(f, "a process's pipe (the host's end)")
		}
	}
}

// closeLogged closes c and logs a failure (slog's default logger, which
// `warden serve` sets): a close that fails may mean a descriptor leaked.
func closeLogged(c io.Closer, what string) {
	if err := c.Close(); err != nil {
		slog.Error("e2b: closing "+what, "err", err)
	}
}
