// Package poddial is the router's side of a sandbox Pod's agent
// (internal/podinit): it dials the Pod's init, proves the Pod's key and
// attaches an agent session over the connection, as the microvm backend
// does over a VM's serial port. It is apart from podinit so that
// warden-init links none of the host's side.
package poddial

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Dial connects to a Pod's init at addr ("PodIP:7070") and proves key
// (podinit.Key of the Pod's UID), within ctx and podinit.HandshakeTimeout.
// The Adoption says whether the key took the Pod now or owned it already;
// a Pod another key owns fails with podinit.ErrTaken, and the router must
// not use it.
func Dial(ctx context.Context, addr string, key ed25519.PrivateKey) (*net.TCPConn, podinit.Adoption, error) {
	ctx, cancel := context.WithTimeout(ctx, podinit.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, 0, fmt.Errorf("dialing the Pod's agent: %w", err)
	}
	tc := c.(*net.TCPConn)
	a, err := present(ctx, tc, key)
	if err != nil {
		// the handshake's failure is the news; the close cannot add to it
		_ = tc.Close()
		return nil, 0, fmt.Errorf("the Pod's agent at %s: %w", addr, err)
	}
	if err := podinit.KeepAlive(tc); err != nil {
		slog.Warn("setting keepalive on the connection to a Pod's agent", "addr", addr, "err", err)
	}
	return tc, a, nil
}

// present runs Present on c within ctx. A ctx that ends as the
// handshake does fails it, even one that succeeded: the deadline set
// when ctx ended may land after this clears it, and would cut the
// session's first read.
func present(ctx context.Context, c *net.TCPConn, key ed25519.PrivateKey) (podinit.Adoption, error) {
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return 0, fmt.Errorf("setting the handshake's deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		// a connection whose deadline cannot be set is closed by the caller anyway
		_ = c.SetDeadline(time.Unix(1, 0))
	})
	a, err := podinit.Present(c, key, c.RemoteAddr().String())
	if !stop() {
		if err == nil {
			return 0, fmt.Errorf("%w as the handshake ended", ctx.Err())
		}
		return 0, fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	if err != nil {
		return 0, err
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return 0, fmt.Errorf("clearing the handshake's deadline: %w", err)
	}
	return a, nil
}

// Attach starts a session of s on conn, a connection Dial admitted, and
// returns once the Pod's agent is ready (ctx bounds only that wait); the
// session owns conn, even on failure. The Pod's box is not the host's:
// the session has no workspace on this host (Workspace is nil, and the
// file API refuses it), cannot pause, and its Close ends the Pod's
// processes by closing the connection, on which the Pod's init kills
// every process the session left; deleting the Pod is the backstop the
// host cannot watch. The agent applies s's rlimits (CPU time, file
// size, open files, processes) and the CPU count in view; memory, CPU
// time and disk are the Pod's resources, its template's. Its network is
// this process's: with --net proxy the session gets its own socket on
// this process's egress proxy (agent.AttachEgress: the rules, audit,
// byte budget and pace of every other backend's), and the Pod's agent
// runs the egress bridge on the Pod's 127.0.0.1 (agent.EgressPort, the
// HTTP(S)_PROXY of its execs), opening a stream channel per connection,
// which the session relays to that socket; the Pod itself needs no
// egress. Without the proxy a channel the Pod opens is a breach that
// ends the session.
func Attach(ctx context.Context, conn *net.TCPConn, s spec.Spec, log *slog.Logger) (*agent.Session, error) {
	f, err := conn.File()
	cerr := conn.Close()
	if err != nil {
		return nil, fmt.Errorf("taking the Pod's connection: %w", err)
	}
	if cerr != nil {
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("taking the Pod's connection: %w (and closing its copy: %w)", cerr, err)
		}
		return nil, fmt.Errorf("taking the Pod's connection: %w", cerr)
	}
	if err := Refuse(s); err != nil {
		// refused before a byte was sent; nothing to report of the close
		_ = f.Close()
		return nil, err
	}
	// Its socket is named apart from every other: one process may hold
	// a session's earlier box still closing.
	att, err := agent.AttachEgressFor(boxname.Box(), s)
	if err != nil {
		// refused before a byte was sent; nothing to report of the close
		_ = f.Close()
		return nil, err
	}
	cfg := agent.BoxedConfig(s, false, true)
	cfg.Stream = true
	// The Pod's kernel (gVisor's) answers sysinfo(2) for the Pod.
	cfg.KernelSysinfo = true
	if err := agent.HandOverBoxed(f, cfg, att); err != nil {
		// the hand-over's failure is the news
		_ = f.Close()
		closeEgress(att, log)
		return nil, err
	}
	exited := make(chan struct{})
	var once sync.Once
	return agent.Attach(ctx, agent.Frame{
		Spec: s, Control: f, Stream: true,
		// No host ids: the box's files are not on this host.
		UID: -1, GID: -1,
		Egress: att, EgressChannels: att != nil,
		Env: func(extra []string) []string { return agent.ImageEnv(att != nil, s.Root.Env, extra) },
		Log: log,
		// Kill shuts the connection down, which ends the Pod's agent at
		// once (it reads the end) and so every process of the session;
		// the descriptor stays open, its number not reused, until the
		// session closes it.
		Kill:    func() { once.Do(func() { shutdown(f, log); close(exited) }) },
		Exited:  exited,
		Ended:   func() string { return "the router closed its connection to the Pod's agent" },
		Cleanup: func() { closeEgress(att, log) },
		Pause:   cannotPause,
		// Pause never succeeds, so there is never anything to resume.
		Resume: func(context.Context) error { return nil },
	})
}

// errFileClosing is what SyscallConn().Control returns on a closed
// *os.File: internal/poll's ErrFileClosing, which wraps no exported
// error (not os.ErrClosed), so shutdown learns it from a file of its
// own it closed.
var errFileClosing = closedControlError()

// closedControlError is Control's error on a closed pipe, or nil if no
// pipe could be made (then shutdown warns of a closed file, as it would
// of any failure).
func closedControlError() error {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	// closed to learn the error of a closed file; nothing was written
	_ = w.Close()
	_ = r.Close() // as above: an empty pipe end, closed to get the error
	rc, err := r.SyscallConn()
	if err != nil {
		return nil
	}
	return rc.Control(func(uintptr) {})
}

// shutdown shuts down both directions of the connection f, logging a
// failure. A descriptor the session closed already (its stream closes
// it when the Pod hangs up) is no failure: its close ended the
// connection, which only it held.
func shutdown(f *os.File, log *slog.Logger) {
	rc, err := f.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { err = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
		if cerr != nil {
			err = cerr
		}
	}
	if err != nil && !errors.Is(err, unix.ENOTCONN) && (errFileClosing == nil || !errors.Is(err, errFileClosing)) {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("shutting down the connection to a Pod's agent", "err", err)
	}
}

// cannotPause is a Pod's Pause: the router reaches no freezer of the
// Pod's.
func cannotPause(context.Context) error {
	return fmt.Errorf("%w: a Pod's processes cannot be frozen from the router", agent.ErrCannotPause)
}

// Refuse says, in one line, what of s a Pod's box cannot do.
func Refuse(s spec.Spec) error {
	if err := s.ValidateSandbox(); err != nil {
		return err
	}
	switch {
	case s.Workspace != "":
		return fmt.Errorf("%w: a Pod's /workspace is its own volume; it takes no host --workspace", spec.ErrInvalid)
	case s.Scratch != "":
		return fmt.Errorf("%w: a Pod keeps its writable space in its own volumes; it takes no host scratch", spec.ErrInvalid)
	case !s.Root.IsHost():
		return fmt.Errorf("%w: a Pod's root is its SandboxTemplate's image, not Warden template %q", spec.ErrInvalid, s.Root.Template)
	}
	return nil
}

// closeEgress closes a session's proxy socket (nil: none), once the
// session has ended: its connections still open end, and their audit
// events are final.
func closeEgress(att *egress.Attachment, log *slog.Logger) {
	if att == nil {
		return
	}
	if err := att.Close(); err != nil {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("closing a Pod session's egress proxy socket", "err", err)
	}
}
