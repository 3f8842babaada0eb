package nsinit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"github.com/warden-sandbox/warden/internal/egress"
)

// The bridge is the sandbox's only way out with --net proxy: the sandbox
// has no interface but lo, and the init listens on a port there and hands
// each connection it accepts to the egress proxy: it connects to the
// proxy's unix socket, which it reaches through EgressFD (the socket lives
// outside the sandbox's root, and nothing but the init holds a way to it),
// and sends the accepted socket's descriptor on it, attached to one NUL
// byte. The proxy then talks to the sandbox's socket directly and knows
// the sandbox by the unix socket the descriptor came on; the bridge never
// touches the bytes.

// egressSocket is how the init names the proxy's socket: its own O_PATH
// descriptor, through /proc, which needs no path inside the sandbox.
var egressSocket = "/proc/self/fd/" + strconv.Itoa(EgressFD)

// startBridge listens on the sandbox's loopback before any user code runs,
// so nothing else can take the port, and serves it from other threads
// than the one the user's code is forked from.
func startBridge(cfg *Config) error {
	if cfg.EgressPort == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.EgressPort)))
	if err != nil {
		return err
	}
	dial := dialEgress
	if cfg.Boxed {
		dial = (&egressLink{fd: EgressFD}).dial
	}
	pass := handOffConn
	if cfg.EgressRelay {
		pass = relay
	}
	if cfg.Boxed && cfg.Stream && cfg.HideAgent {
		// The stream will be the user's agent's, in another process:
		// the listener goes to it (serveThroughUserAgent).
		return keepBridgeListener(ln)
	}
	if cfg.Boxed && cfg.Stream {
		// A channel per connection: nothing can be handed over a stream.
		dial, pass = streamEgress.dial, relay
	}
	serveBridgeOn(ln, egress.Pace{Rate: cfg.EgressRate, Burst: cfg.EgressBurst}, dial, pass)
	return nil
}

// serveBridgeOn serves the bridge on ln from other goroutines, paced by
// pace, each connection given to the proxy through dial and pass.
func serveBridgeOn(ln net.Listener, pace egress.Pace, dial func() (egressConn, error), pass func(c net.Conn, p egressConn)) {
	go serveBridge(ln, pace.Limiter(), time.Sleep, func(c net.Conn) { bridge(c, dial, pass) })
}

// bridgeListener is the bridge's listener a uid-0 agent keeps for the
// user's agent (keepBridgeListener), or nil.
var bridgeListener *os.File

// keepBridgeListener keeps ln's socket for the user's agent, which
// serves the bridge over its stream: the port is bound here, before any
// user code runs, and served there, where the stream's channels are.
func keepBridgeListener(ln net.Listener) error {
	f, err := ln.(*net.TCPListener).File()
	if cerr := ln.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("keeping the bridge's listener for the user's agent: %w", err)
	}
	bridgeListener = f
	return nil
}

// bridgeDialTimeout bounds reaching the proxy, which lives on this host.
const bridgeDialTimeout = 10 * time.Second

// maxHandOffs bounds hand-offs in progress: each holds three descriptors
// for a moment, counted against the sandbox's own open-files limit, which
// the init shares. A connection past it is closed at once.
const maxHandOffs = 64

// serveBridge accepts until the listener closes; an error such as running
// out of descriptors only pauses it, so a burst of connections cannot
// take the sandbox's way out down for good. Past its pace (lim; nil: not
// paced) it waits (with wait), holding the connection it has just
// accepted, for that connection's turn: the work each connection costs on
// threads outside the sandbox's cgroup, and the proxy's, waits, and the
// later connections wait in the listen backlog, at the sandbox's own
// cost. A failed accept takes no turn.
func serveBridge(ln net.Listener, lim *rate.Limiter, wait func(time.Duration), handle func(net.Conn)) {
	slots := make(chan struct{}, maxHandOffs)
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if lim != nil {
			if d := lim.Reserve().Delay(); d > 0 {
				wait(d)
			}
		}
		select {
		case slots <- struct{}{}:
			go func() {
				defer func() { <-slots }()
				handle(c)
			}()
		default:
			c.Close()
		}
	}
}

// bridge gives one accepted connection to the proxy over a connection
// from dial. Failing that, the client sees the connection close; the
// proxy answers every refusal itself, once it has the connection.
func bridge(c net.Conn, dial func() (egressConn, error), pass func(c net.Conn, p egressConn)) {
	defer c.Close()
	p, err := dial()
	if err != nil {
		return
	}
	defer p.Close()
	pass(c, p)
}

// egressConn is the bridge's connection to the proxy: a unix socket, or
// over the stream transport a channel.
type egressConn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// dialEgress connects to the proxy's socket through EgressFD.
func dialEgress() (egressConn, error) {
	p, err := net.DialTimeout("unix", egressSocket, bridgeDialTimeout)
	if err != nil {
		return nil, err
	}
	return p.(*net.UnixConn), nil
}

// handOffConn sends c's descriptor to the proxy on p, a unix socket.
func handOffConn(c net.Conn, ep egressConn) {
	tc, ok := c.(*net.TCPConn)
	p, isUnix := ep.(*net.UnixConn)
	if !ok || !isUnix {
		return
	}
	f, err := tc.File()
	if err != nil {
		return
	}
	defer f.Close()
	// a hand-over that fails closes the connection with f: the box sees it refused
	_, _, _ = p.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil)
}
