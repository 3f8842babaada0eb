package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// Client is the server's end of the spawner. The spawner is started on
// first use, and again on the next use after it died.
type Client struct {
	mu   sync.Mutex
	conn *conn
}

// Proc is an init the spawner started.
type Proc struct {
	Pid int
	// Exited is closed once the spawner reaped the init (or died).
	Exited <-chan struct{}
	p      *pending

	mu sync.Mutex
	// pidfd is nil once released: its number may then be another's.
	pidfd *os.File
}

// Exit is how the init ended, once Exited is closed; nil if the spawner
// died first.
func (p *Proc) Exit() *Exit {
	<-p.Exited
	return p.p.exit
}

// Signal sends sig to the init through its pidfd: after the init is
// reaped its pid may be someone else's, its pidfd never is. Once the
// pidfd is released it reports os.ErrProcessDone.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd == nil {
		return os.ErrProcessDone
	}
	return unix.PidfdSendSignal(int(p.pidfd.Fd()), sig, nil, 0)
}

// Release closes the pidfd; call it once the init has exited.
func (p *Proc) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd != nil {
		p.pidfd.Close()
		p.pidfd = nil
	}
}

// Start has the spawner start an init (see Command for the arguments).
func (c *Client) Start(i Init, stdio [3]*os.File, extra []*os.File, cgroupDir *os.File) (*Proc, error) {
	req := request{Kind: "init", Init: i, Cgroup: cgroupDir != nil}
	files := stdio[:]
	for _, f := range extra {
		req.Extra = append(req.Extra, f != nil)
		if f != nil {
			files = append(files, f)
		}
	}
	if cgroupDir != nil {
		files = append(files, cgroupDir)
	}
	cl, res, err := c.call(req, files)
	if err != nil {
		return nil, err
	}
	if len(res.files) != 1 || res.r.Pid <= 0 {
		closeAll(res.files)
		return nil, fmt.Errorf("the spawner answered a start without a pid and pidfd")
	}
	return &Proc{Pid: res.r.Pid, pidfd: res.files[0], Exited: cl.exited, p: cl}, nil
}

// UserNamespace has the spawner make a user namespace (see the function
// UserNamespace), so the server is not forked for it.
func (c *Client) UserNamespace(insideUID, hostUID, insideGID, hostGID int) (*os.File, error) {
	req := request{Kind: "userns", Map: idMap{insideUID, hostUID, insideGID, hostGID}}
	_, res, err := c.call(req, nil)
	if err != nil {
		return nil, err
	}
	if len(res.files) != 1 {
		closeAll(res.files)
		return nil, fmt.Errorf("the spawner answered without a namespace")
	}
	return res.files[0], nil
}

// call sends req and waits for its first answer. A spawner that dies
// before answering is replaced and asked once more: nothing was started.
func (c *Client) call(req request, files []*os.File) (*pending, result, error) {
	var p *pending
	var res result
	for attempt := 0; attempt < 2; attempt++ {
		cn, err := c.current()
		if err != nil {
			return nil, result{}, err
		}
		if p, err = cn.send(req, files); err != nil && !errors.Is(err, ErrDied) {
			return nil, result{}, err
		}
		if err == nil {
			if res = <-p.started; !errors.Is(res.err, ErrDied) {
				break
			}
		}
		res = result{err: ErrDied}
	}
	if res.err != nil {
		return nil, result{}, res.err
	}
	if res.r.Error != "" {
		closeAll(res.files)
		return nil, result{}, res.r.err()
	}
	return p, res, nil
}

// current returns a live spawner, starting one if there is none.
func (c *Client) current() (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && !c.conn.isDead() {
		return c.conn, nil
	}
	cn, err := startSpawner()
	if err != nil {
		return nil, fmt.Errorf("starting the sandbox spawner: %w", err)
	}
	c.conn = cn
	return cn, nil
}

// conn is one spawner process and the requests it has not finished.
type conn struct {
	fd  *os.File
	pid int // the spawner's, for tests

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*pending
	dead    bool
	// dying makes die run once, whether the reader or a sender finds
	// the spawner gone first.
	dying sync.Once
}

type pending struct {
	started chan result
	exited  chan struct{}
	// answered says the first reply came; the next one is the exit.
	answered bool
	exit     *Exit
}

type result struct {
	r     reply
	files []*os.File
	err   error
}

// startSpawner forks the spawner from a thread that stays locked for as
// long as the spawner lives: its parent-death signal is tied to that
// thread, and it must fire when this process dies, not before.
func startSpawner() (*conn, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "spawner"), os.NewFile(uintptr(pair[1]), "spawner")
	started := make(chan error, 1)
	pid := 0
	go func() {
		runtime.LockOSThread()
		cmd := &exec.Cmd{
			Path:        nsinit.Binary(),
			Args:        []string{Arg0},
			Env:         []string{},
			Stderr:      os.Stderr, // where a crash of it can be read
			ExtraFiles:  []*os.File{theirs},
			SysProcAttr: &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL},
		}
		err := cmd.Start()
		theirs.Close()
		if err == nil {
			pid = cmd.Process.Pid
		}
		started <- err
		if err == nil {
			// How it ended is in ProcessState, printed below.
			_ = cmd.Wait()
			// It only ends on its own by dying: this process never
			// closes its end while it lives.
			fmt.Fprintf(os.Stderr, "warden: the sandbox spawner (pid %d) ended (%v); its sandboxes ended with it, and the next one starts a new spawner\n", pid, cmd.ProcessState)
		}
	}()
	if err := <-started; err != nil {
		mine.Close()
		return nil, err
	}
	cn := &conn{fd: mine, pid: pid, pending: map[uint64]*pending{}}
	go cn.read()
	return cn, nil
}

func (cn *conn) isDead() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.dead
}

func (cn *conn) send(req request, files []*os.File) (*pending, error) {
	cn.mu.Lock()
	if cn.dead {
		cn.mu.Unlock()
		return nil, ErrDied
	}
	cn.next++
	req.ID, req.Version = cn.next, nsinit.Version
	p := &pending{started: make(chan result, 1), exited: make(chan struct{})}
	err := send(int(cn.fd.Fd()), req, files...)
	if err == nil {
		cn.pending[req.ID] = p
	}
	cn.mu.Unlock()
	switch {
	case errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET):
		cn.die()
		return nil, ErrDied
	case err != nil:
		return nil, fmt.Errorf("asking the sandbox spawner: %w", err)
	}
	return p, nil
}

// read delivers replies until the spawner's end closes; then every
// request still open fails, and every init it started counts as exited
// (they die with the spawner). It alone closes the socket, once marked
// dead: it receives on the descriptor's number, which, closed under it by
// another goroutine, could meanwhile be a client's connection.
func (cn *conn) read() {
	fd := int(cn.fd.Fd())
	for {
		var r reply
		files, err := recv(fd, &r)
		if err != nil && !errors.Is(err, ErrNoDescriptors) {
			cn.die()
			cn.fd.Close()
			return
		}
		cn.deliver(r, files, err)
	}
}

// deliver hands a reply to its request. lost (ErrNoDescriptors) says the
// descriptors that came with it are gone: the request fails with it, and
// an init that was started nonetheless stays pending until its exit,
// which follows once its caller, failing, closes the init's control
// socket.
func (cn *conn) deliver(r reply, files []*os.File, lost error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	p, ok := cn.pending[r.ID]
	switch {
	case !ok:
		closeAll(files)
	case !p.answered:
		p.answered = true
		p.started <- result{r: r, files: files, err: lost}
		if r.Error != "" || r.Pid == 0 {
			close(p.exited)
			delete(cn.pending, r.ID)
		}
	default:
		closeAll(files)
		p.exit = r.Exit
		close(p.exited)
		delete(cn.pending, r.ID)
	}
}

func (cn *conn) die() {
	cn.dying.Do(cn.fail)
}

func (cn *conn) fail() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.dead = true
	for id, p := range cn.pending {
		if !p.answered {
			p.started <- result{err: ErrDied}
		}
		close(p.exited)
		delete(cn.pending, id)
	}
	// Wakes read, which closes the socket.
	_ = unix.Shutdown(int(cn.fd.Fd()), unix.SHUT_RDWR)
}
