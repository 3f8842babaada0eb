//go:build !linux

package spawn

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Main is Linux-only: there are no sandboxes to spawn elsewhere.
func Main() {
	fmt.Fprintln(os.Stderr, "warden-spawner: sandboxes run on Linux only")
	os.Exit(2)
}

// Client is Linux-only, like Main.
type Client struct{}

// Proc is Linux-only, like Main.
type Proc struct {
	Pid    int
	Exited <-chan struct{}
}

// Exit is Linux-only, like Main.
func (p *Proc) Exit() *Exit { return nil }

// Signal is Linux-only, like Main.
func (p *Proc) Signal(syscall.Signal) error { return errors.ErrUnsupported }

// Release is Linux-only, like Main.
func (p *Proc) Release() {}

// Start is Linux-only, like Main.
func (c *Client) Start(Init, [3]*os.File, []*os.File, *os.File) (*Proc, error) {
	return nil, errors.ErrUnsupported
}

// UserNamespace is Linux-only, like Main.
func (c *Client) UserNamespace(int, int, int, int) (*os.File, error) {
	return nil, errors.ErrUnsupported
}
