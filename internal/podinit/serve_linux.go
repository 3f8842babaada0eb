package podinit

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// HandshakeTimeout bounds a connection's handshake: a peer that sends
// nothing, or too little, is cut then.
const HandshakeTimeout = 5 * time.Second

// refusalBurst is how many refusals the init logs a refusalWindow; it
// counts the others and logs their number with the next line. A flood of
// refusals so costs the Pod's log a few lines a second and the init no
// time: waiting after a refusal would only delay the next router, and a
// peer cannot guess a key however fast it tries.
const (
	refusalBurst  = 10
	refusalWindow = time.Second
)

// sweepTimeout bounds the kill of what a session left in the Pod.
const sweepTimeout = 10 * time.Second

// Keepalive figures of a served connection: a router that vanished
// without a word (its node lost, the network cut) is noticed within
// about a minute, and the Pod becomes adoptable by its key again.
const (
	keepIdle     = 15 * time.Second
	keepInterval = 5 * time.Second
	keepCount    = 4
	userTimeout  = 60 * time.Second
)

// IsPod says argv starts warden-init's pod mode.
func IsPod(argv []string) bool { return len(argv) >= 2 && argv[1] == Arg }

// Main runs the pod mode and never returns: it exits 2 on a usage error
// and 1 once it cannot serve on (the listener failed, or a session's
// processes could not be killed, after which the Pod must not be used).
func Main() {
	a, err := parseArgs(os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-init pod:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "warden-init pod:", run(a))
	os.Exit(1)
}

// podArgs are the pod mode's arguments.
type podArgs struct {
	// addr is where to listen, unless fd is set; with fd, the address
	// routers reach the Pod at (--addr), which their proofs sign.
	addr string
	// fd, when not -1, is an inherited listening unix stream socket to
	// serve on instead (--listen-fd): for a launcher that accepts TCP on
	// the Pod's address outside the init's network namespace and relays
	// each connection into it.
	fd int
	// inWarden says the init is a native Warden sandbox's program rather
	// than PID 1 (--in-warden-sandbox; checkUnderWardenInit).
	inWarden bool
}

// usage is the pod mode's synopsis, for a usage error.
var usage = fmt.Sprintf("usage: warden-init %s [--listen ADDR | --listen-fd N --addr IP:PORT] [--in-warden-sandbox] (default: --listen :%d)", Arg, Port)

// parseArgs parses the pod mode's arguments.
func parseArgs(args []string) (podArgs, error) {
	a := podArgs{addr: ":" + strconv.Itoa(Port), fd: -1}
	listen, addr := false, false
	for len(args) > 0 {
		switch {
		case args[0] == "--in-warden-sandbox" && !a.inWarden:
			a.inWarden, args = true, args[1:]
		case args[0] == "--listen" && len(args) >= 2 && !listen && !addr:
			a.addr, listen, args = args[1], true, args[2:]
		case args[0] == "--listen-fd" && len(args) >= 2 && !listen:
			fd, err := strconv.Atoi(args[1])
			if err != nil || fd < 0 {
				return podArgs{}, fmt.Errorf("--listen-fd %.20q is not a descriptor number; %s", args[1], usage)
			}
			a.fd, listen, args = fd, true, args[2:]
		case args[0] == "--addr" && len(args) >= 2 && !addr && a.fd >= 0:
			ap, err := netip.ParseAddrPort(args[1])
			if err != nil {
				return podArgs{}, fmt.Errorf("--addr %.60q is not IP:PORT, the address routers reach the Pod at; %s", args[1], usage)
			}
			a.addr, addr, args = ap.String(), true, args[2:]
		default:
			return podArgs{}, errors.New(usage)
		}
	}
	if a.fd >= 0 && !addr {
		return podArgs{}, fmt.Errorf("--listen-fd needs --addr IP:PORT, the address routers reach the Pod at (their proofs sign it); %s", usage)
	}
	return a, nil
}

// run serves as a says until it cannot, and says why.
func run(a podArgs) error {
	check := checkPID1
	if a.inWarden {
		check = checkUnderWardenInit
	}
	if err := check(); err != nil {
		return err
	}
	if os.Getuid() == 0 || os.Geteuid() == 0 {
		return errors.New("refusing to run as root: run the Pod as a non-root uid (securityContext runAsNonRoot, runAsUser, e.g. 65532)")
	}
	// Non-dumpable: the user's processes run as this uid, and must not
	// read this process's memory or reach its descriptors (the listener)
	// through /proc or ptrace.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the init non-dumpable: %w", err)
	}
	dropSignals()
	ln, err := listen(a)
	if err != nil {
		return err
	}
	log.SetFlags(0)
	log.SetPrefix(logPrefix)
	s := &server{ln: ln, log: log.Default(), refusals: refusalLog{log: log.Default(), now: time.Now}, handshake: HandshakeTimeout, serve: serveAgent}
	addr := ln.Addr().String()
	if a.fd >= 0 {
		s.addr, addr = a.addr, a.addr
	}
	s.log.Print(listening(addr))
	return s.loop()
}

// listen is the listener a asks for: the inherited one or a new one.
func listen(a podArgs) (net.Listener, error) {
	if a.fd >= 0 {
		return inheritedListener(a.fd)
	}
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the router: %w", err)
	}
	return ln, nil
}

// dropSignals catches and drops every signal Go relays. The user's
// processes run as the init's uid and may signal it: the kernel drops a
// signal sent from inside the namespace to its PID 1 only while the
// signal's disposition is the default, and Go installs handlers whose
// default is to exit. An init that exited would be restarted by the Pod
// (restartPolicy Always) with the Pod's address and volumes, adoptable
// by anyone on first use. Caught rather than ignored: an ignored
// disposition would be inherited by the agent and the user's programs.
func dropSignals() {
	signal.Notify(make(chan os.Signal, 1))
}

// checkPID1 refuses to run but as PID 1 of a PID namespace of the Pod's
// own: the end of every session kills every other process there
// (killAll), which is only the session's processes when the namespace is
// the container's alone.
func checkPID1() error {
	if os.Getpid() != 1 {
		return fmt.Errorf("running as pid %d: the pod mode must be its container's first process (PID 1; no shareProcessNamespace)", os.Getpid())
	}
	return nil
}

// server is the pod mode's accept loop: one connection at a time, each
// admitted by owner, then served until it ends.
type server struct {
	ln net.Listener
	// addr, when set, is the Pod's address that proofs sign, for a
	// listener whose connections are relayed (unix ones) and so do not
	// carry it; unset, a connection's local address is.
	addr      string
	owner     Owner
	log       *log.Logger
	refusals  refusalLog
	handshake time.Duration
	// serve serves an admitted connection until the session ends, and
	// fails only when the Pod cannot serve on (serveAgent).
	serve func(net.Conn) error
}

// loop accepts and serves until the listener or a session's cleanup
// fails.
func (s *server) loop() error {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return fmt.Errorf("accepting on %s: %w", s.ln.Addr(), err)
		}
		if s.fromItself(c) {
			// The Pod's own processes queued it during a session: they
			// are gone, and waiting for each would only delay the next
			// router.
			closeConn(c, s.log)
			s.refusals.printf("refused %s: a connection from the Pod itself", peer(c))
			continue
		}
		a, err := s.admit(c)
		if err != nil {
			closeConn(c, s.log)
			s.refusals.printf("refused %s: %v", peer(c), err)
			continue
		}
		s.refusals.flush()
		s.log.Printf("serving %s (%s)", peer(c), a)
		if err := s.serve(c); err != nil {
			return err
		}
		s.log.Printf("session of %s ended; the Pod is adoptable by its key again", peer(c))
	}
}

// refusalLog logs at most refusalBurst refusals a refusalWindow, one
// line each, and the number of those it left out with the next line.
type refusalLog struct {
	log     *log.Logger
	now     func() time.Time
	start   time.Time
	n       int
	dropped int
}

// printf logs a refusal, or counts it once the window's lines are spent.
func (r *refusalLog) printf(format string, args ...any) {
	if t := r.now(); t.Sub(r.start) >= refusalWindow {
		r.flush()
		r.start, r.n = t, 0
	}
	if r.n >= refusalBurst {
		r.dropped++
		return
	}
	r.n++
	r.log.Printf(format, args...)
}

// flush logs how many refusals were left out, if any.
func (r *refusalLog) flush() {
	if r.dropped > 0 {
		r.log.Printf("%d more refusals not logged (at most %d a second)", r.dropped, refusalBurst)
		r.dropped = 0
	}
}

// peer names c's peer for the log: its address, or for a relayed (unix)
// connection, which carries none, that it was relayed.
func peer(c net.Conn) string {
	if _, ok := c.(*net.UnixConn); ok {
		return "a relayed connection"
	}
	return c.RemoteAddr().String()
}

// fromItself says c comes from the Pod's own processes, never a router:
// see itself. A relayed (unix) connection never does: the listener's
// address is the launcher's, in a network namespace the Pod is not in.
func (s *server) fromItself(c net.Conn) bool {
	listen, lok := s.ln.Addr().(*net.TCPAddr)
	local, cok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !cok || !rok {
		return false
	}
	return itself(listen.IP, local.IP, remote.IP, ownAddrs(s.log))
}

// ownAddrs are the addresses of the Pod's interfaces; none, logged, when
// they cannot be read (loopback is still told apart).
func ownAddrs(l *log.Logger) []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		l.Printf("reading the Pod's addresses: %v", err)
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

// itself says a peer at remote that reached local, on a listener at
// listen, is the Pod itself, given own, the Pod's addresses: it comes
// from the address it reached, or, while the init listens beyond
// loopback, either end is loopback (a router is never on the Pod's
// loopback, and the Pod's code can bind its own address and connect to
// loopback) or it comes from one of own. A test's listener on a loopback
// address takes loopback peers, so there only the same address counts.
func itself(listen, local, remote net.IP, own []net.IP) bool {
	if remote.Equal(local) {
		return true
	}
	if listen.IsLoopback() {
		return false
	}
	if local.IsLoopback() || remote.IsLoopback() {
		return true
	}
	for _, ip := range own {
		if remote.Equal(ip) {
			return true
		}
	}
	return false
}

// admit runs the handshake on c within s.handshake.
func (s *server) admit(c net.Conn) (Adoption, error) {
	if err := c.SetDeadline(time.Now().Add(s.handshake)); err != nil {
		return 0, fmt.Errorf("setting the handshake's deadline: %w", err)
	}
	addr := s.addr
	if addr == "" {
		addr = c.LocalAddr().String()
	}
	a, err := s.owner.Admit(c, rand.Reader, addr)
	if err != nil {
		return 0, err
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return 0, fmt.Errorf("clearing the handshake's deadline: %w", err)
	}
	return a, nil
}

// closeConn closes c, logging a failure.
func closeConn(c net.Conn, l *log.Logger) {
	if err := c.Close(); err != nil {
		l.Printf("closing the connection of %s: %v", peer(c), err)
	}
}

// serveAgent runs the boxed agent (nsinit.BoxedPod) on c until it ends,
// then kills every process the session left (killAll). Only the agent
// holds the connection while it runs, so the router sees it close when
// the agent ends. A relayed connection's keepalive is its relay's.
func serveAgent(c net.Conn) error {
	if tc, ok := c.(*net.TCPConn); ok {
		if err := KeepAlive(tc); err != nil {
			// The session still works; only a router that vanishes
			// silently is then noticed late.
			log.Printf("setting keepalive on the router's connection: %v", err)
		}
	}
	fc, ok := c.(interface{ File() (*os.File, error) })
	if !ok {
		closeConn(c, log.Default())
		return fmt.Errorf("passing the connection to the agent: a %T has no descriptor", c)
	}
	f, err := fc.File()
	closeConn(c, log.Default())
	if err != nil {
		return fmt.Errorf("passing the connection to the agent: %w", err)
	}
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   []string{nsinit.BoxedPath, nsinit.BoxedPod},
		Env:    []string{"PATH=/usr/bin:/bin"},
		Stdin:  f,
		Stdout: os.Stderr,
		Stderr: os.Stderr,
	}
	err = cmd.Start()
	if cerr := f.Close(); cerr != nil {
		log.Printf("closing the init's copy of the connection: %v", cerr)
	}
	if err != nil {
		return fmt.Errorf("starting the agent: %w", err)
	}
	waitAgent(cmd.Process.Pid)
	// reaped by waitAgent; Release only closes the pidfd os/exec holds
	if err := cmd.Process.Release(); err != nil {
		log.Printf("releasing the agent's process: %v", err)
	}
	return killAll(time.Now().Add(sweepTimeout))
}

// waitAgent waits for the agent at pid to end and reaps it. It waits for
// stops too: the user's processes run as the agent's uid and can SIGSTOP
// it, which no handler can catch, and a stopped agent would never read
// its router's end, so the init would wait for it, and killAll would
// never run, for good. A stopped agent is killed at once, which ends its
// session. Its end is logged unless it exited 0: the router saw the
// session end on the connection, but only the Pod's log can say why an
// agent crashed.
func waitAgent(pid int) {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WUNTRACED, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			log.Printf("waiting for the agent: %v", err)
			return
		case ws.Stopped():
			log.Printf("the agent was stopped (%v): killing it, which ends its session", ws.StopSignal())
			if err := unix.Kill(pid, unix.SIGKILL); err != nil {
				log.Printf("killing the stopped agent: %v", err)
			}
			continue
		}
		if s := agentEnd(ws); s != "" {
			log.Printf("the agent ended: %s", s)
		}
		return
	}
}

// agentEnd says how an agent that did not exit 0 ended, in a few words,
// or "" for exit 0.
func agentEnd(ws unix.WaitStatus) string {
	switch {
	case ws.Signaled():
		return fmt.Sprintf("killed by %v", ws.Signal())
	case ws.ExitStatus() != 0:
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	}
	return ""
}

// KeepAlive makes the kernel probe c's idle peer and give up on one that
// stopped answering within about a minute: the init's end of a session
// whose router vanished, and the router's end of a Pod that did.
func KeepAlive(c *net.TCPConn) error {
	if err := c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: keepIdle, Interval: keepInterval, Count: keepCount}); err != nil {
		return err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout/time.Millisecond))
	}); err != nil {
		return err
	}
	return serr
}

// killAll kills every process of the PID namespace but this one (kill
// -1 from its PID 1) and reaps them, until none is left or deadline.
func killAll(deadline time.Time) error {
	for {
		kerr := unix.Kill(-1, unix.SIGKILL)
		if kerr != nil && !errors.Is(kerr, unix.ESRCH) {
			return fmt.Errorf("killing the session's processes: %w", kerr)
		}
		werr := reapAll()
		if errors.Is(kerr, unix.ESRCH) && errors.Is(werr, unix.ECHILD) {
			return nil
		}
		if werr != nil && !errors.Is(werr, unix.ECHILD) {
			return fmt.Errorf("reaping the session's processes: %w", werr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the session's processes outlived SIGKILL for %v; the Pod cannot be reused", sweepTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// reapAll reaps every child that has ended, without waiting: ECHILD when
// none is left at all.
func reapAll() error {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case pid == 0:
			return nil
		}
	}
}
