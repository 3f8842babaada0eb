package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
)

// The box pauses and resumes by asking its sentry directly, over the
// control socket runsc made for it, what `runsc pause` and `runsc
// resume` ask it: those start a Go program each time, which reads and
// locks runsc's state and costs 20-40 ms, where the call itself takes
// 1-3 ms. The wire format is gVisor's urpc (pkg/urpc of the pinned
// runsc): one JSON object {"method","arg"} each way on a stream socket,
// files passed as SCM_RIGHTS, which this client never sends and never
// takes (a read(2) drops any the sentry sends). The sentry is hostile: its
// reply is bounded in size and time and parsed strictly, and the socket
// is used only when the kernel says the box's sentry listens on it.

// The sentry's methods for a pause and a resume (runsc/boot/controller.go
// ContMgrPause, ContMgrResume): kernel.Pause stops every task and waits
// for them; kernel.Unpause lets them run again. The sentry counts pauses:
// a resume it was not paused for panics it, which ends the box.
const (
	sentryPause  = "containerManager.Pause"
	sentryResume = "containerManager.Resume"
)

// maxControlReply bounds the sentry's reply to a pause or a resume, about
// 40 bytes from an honest sentry.
const maxControlReply = 4096

// maxSentryError bounds how much of an error the sentry sent is quoted.
const maxSentryError = 200

// sentryProbe is a method no sentry has, called once per runsc binary
// before its boxes pause through their sentry (Runtime.speaksControl):
// only a sentry that answers it with exactly probeReply, the pinned
// urpc's answer to an unknown method (pkg/urpc handleOne), speaks the
// wire format this client knows; the boxes of any other runsc pause with
// runsc pause.
const (
	sentryProbe = "warden.Probe"
	probeReply  = `{"success":false,"err":"unknown method","result":null}`
)

// controlSocket is where the pinned runsc makes the box's control socket
// (runsc/sandbox/sandbox.go createControlSocket: its --root first). A
// runsc that puts it elsewhere, or uses an abstract socket (the runscs of
// 2022), has none there: the box then pauses with runsc pause.
func controlSocket(id string) string {
	return filepath.Join(runscRoot, "runsc-"+id+".sock")
}

// probeWait bounds the probe of a runsc binary (speaksControl); an
// honest sentry answers in about a millisecond.
const probeWait = 2 * time.Second

// probeRetry is how long a probe that got no answer (a sentry slow under
// load, a socket not there) is taken for "no": that binary's boxes pause
// with runsc pause meanwhile, and are probed again after it.
const probeRetry = 30 * time.Second

// controlProbe is what the probe of one runsc binary found: speaks says
// its sentries answer as the pinned urpc does; until, when set, that a
// "no" holds only until then; probing that a probe is under way, and
// nothing is known yet.
type controlProbe struct {
	speaks  bool
	until   time.Time
	probing bool
}

// known says p, an answer (no probe under way), holds now.
func (p controlProbe) known() bool {
	return p.until.IsZero() || time.Now().Before(p.until)
}

// speaksControl says the sentries of b's runsc binary (box.bin) speak the
// pinned urpc: the first pause of the binary's boxes probes it through
// b's sentry (sentryProbe, within probeWait) and the answer is kept by
// the binary, so a runsc replaced at the same path is probed again
// through its own boxes: a format of its own (errOtherFormat) for good,
// a probe that got no answer for probeRetry. An error wraps errBadPeer:
// b's socket is not its sentry's, which says nothing of the binary and
// is not kept. No box waits for another's probe: while one of the
// binary's is under way, b is told "no" (false, nil), which is kept for
// no one, and pauses with runsc pause this time (after a look at its
// socket's listener: sentryPause). The mutex is held only to look up and
// record, never across the probe; a probe that does not record, by an
// error or a panic, releases its claim, so no marker outlives it.
func (r *Runtime) speaksControl(ctx context.Context, b *box) (bool, error) {
	if p, probe := r.claimProbe(b.bin); !probe {
		return p.speaks, nil
	}
	kept := false
	defer func() {
		if !kept {
			r.controlMu.Lock()
			delete(r.control, b.bin)
			r.controlMu.Unlock()
		}
	}()
	p, err := r.probe(ctx, b)
	if err != nil {
		return false, err
	}
	r.controlMu.Lock()
	r.control[b.bin] = p
	r.controlMu.Unlock()
	kept = true
	return p.speaks, nil
}

// claimProbe is what is known of bin's sentries; probe says nothing is,
// and the caller is now the one to probe (controlProbe.probing is set),
// which only it records. While another's probe is under way it is a "no".
func (r *Runtime) claimProbe(bin runscKey) (p controlProbe, probe bool) {
	r.controlMu.Lock()
	defer r.controlMu.Unlock()
	p, ok := r.control[bin]
	switch {
	case p.probing:
		r.logger().Debug("another box's probe of this runsc's sentry is under way; this pause uses runsc pause", "runsc", bin.path)
		return controlProbe{}, false
	case ok && p.known():
		return p, false
	}
	if r.control == nil {
		r.control = map[runscKey]controlProbe{}
	}
	r.control[bin] = controlProbe{probing: true}
	return controlProbe{}, true
}

// probe asks b's sentry sentryProbe within probeWait and says what its
// answer tells of b's runsc binary; an error wraps errBadPeer.
func (r *Runtime) probe(ctx context.Context, b *box) (controlProbe, error) {
	pctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	err := b.callSentry(pctx, sentryProbe)
	switch {
	case errors.Is(err, errBadPeer):
		return controlProbe{}, err
	case err == nil:
		return controlProbe{speaks: true}, nil
	case errors.Is(err, errOtherFormat):
		r.logger().Warn("this runsc's sentry speaks another control format; its boxes pause with runsc pause", "runsc", b.runsc, "err", err)
		return controlProbe{}, nil
	}
	r.logger().Debug("probing this runsc's sentry got no answer; its boxes pause with runsc pause for a while", "runsc", b.runsc, "retry", probeRetry, "err", err)
	return controlProbe{until: time.Now().Add(probeRetry)}, nil
}

// errNotSent says a control call failed before the sentry could have
// read the whole request: the call did not happen.
var errNotSent = errors.New("the request was not sent")

// errBadPeer says the socket's listener is not the box's sentry: only
// root can put a socket under runscRoot, so it is a bug or tampering,
// and the box is never paused through it, nor with runsc pause, which
// would ask the same socket without looking (it is also errNotSent).
// Its text names no pid or uid, as it may reach a tenant: checkPeer
// logs them.
var errBadPeer = errors.New("the control socket's listener is not the box's sentry")

// errRefused says the sentry answered that the call failed: for a pause,
// whose method never fails, that it does not know it (another runsc), so
// it did not happen; a resume may have resumed before it failed.
var errRefused = errors.New("the sentry refused the call")

// errOtherFormat says the sentry answered the probe, but not as the
// pinned urpc does: its runsc speaks another format.
var errOtherFormat = errors.New("the sentry's answer is not the pinned runsc's urpc")

// callSentry calls method on the sentry of runsc run (pid run) at
// socket sock, within ctx and agent.RuntimeWait. An error wrapping
// errNotSent means the call did not happen (no socket, a peer that is
// not the sentry: errBadPeer); one wrapping errRefused that the sentry
// answered it failed; any other error leaves it unknown whether the
// sentry did it. For sentryProbe, nil means the exact probeReply.
func callSentry(ctx context.Context, log *slog.Logger, sock string, run int, method string) error {
	ctx, cancel := context.WithTimeout(ctx, agent.RuntimeWait)
	defer cancel()
	conn, err := dialSentry(ctx, log, sock, run)
	if err != nil {
		return err
	}
	defer closeLogged(log, conn)
	return exchange(ctx, conn, method)
}

// dialSentry connects to the control socket sock of runsc run (pid run)
// and makes sure its listener is the box's sentry (checkPeer), sending
// nothing. An error wraps errNotSent, and errBadPeer for a listener that
// is not the sentry; the caller closes the connection.
func dialSentry(ctx context.Context, log *slog.Logger, sock string, run int) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to the sentry: %w", errNotSent, err)
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		closeLogged(log, c)
		return nil, fmt.Errorf("%w: the connection to %s is a %T, not a unix socket", errNotSent, sock, c)
	}
	if err := checkPeer(log, conn, run); err != nil {
		closeLogged(log, conn)
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	return conn, nil
}

// exchange sends the call on conn and reads the reply, both by ctx's
// deadline.
func exchange(ctx context.Context, conn net.Conn, method string) error {
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return fmt.Errorf("%w: bounding the call: %w", errNotSent, err)
		}
	}
	if err := writeCall(conn, method); err != nil {
		return err
	}
	if method == sentryProbe {
		return readProbeReply(conn)
	}
	return readReply(conn, method)
}

// checkPeer makes sure the socket's listener is the box's sentry: the
// kernel's credentials of the peer (who called listen) name a
// runsc-sandbox child of run, so a stale socket of another box, or one
// any other process made, is never asked. Who the listener is goes to
// log, not into the error, which may reach a tenant.
func checkPeer(log *slog.Logger, conn *net.UnixConn, run int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("reading the control socket's peer: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("reading the control socket's peer: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("reading the control socket's peer: %w", cerr)
	}
	if cred.Uid != 0 || !isSentryOf(int(cred.Pid), run) {
		log.Warn("the box's control socket's listener is not its sentry, a runsc-sandbox child of its runsc", "runsc_pid", run, "listener_pid", cred.Pid, "listener_uid", cred.Uid)
		return errBadPeer
	}
	return nil
}

// writeCall sends the call; one the sentry got only part of is not done
// (it cannot decode it, and the socket closes), so only a whole write
// counts as sent.
func writeCall(conn net.Conn, method string) error {
	req, err := json.Marshal(struct {
		Method string `json:"method"`
		Arg    any    `json:"arg"`
	}{method, nil})
	if err != nil {
		return fmt.Errorf("%w: encoding %s: %w", errNotSent, method, err)
	}
	n, err := conn.Write(req)
	if n < len(req) {
		return fmt.Errorf("%w: sending %s: %w", errNotSent, method, errors.Join(err, io.ErrShortWrite))
	}
	return nil
}

// readReply reads the sentry's one reply, at most maxControlReply bytes,
// with nothing but urpc's three fields; a result other than null or an
// empty object, which a pause and a resume return, is refused.
func readReply(conn net.Conn, method string) error {
	var rep struct {
		Success *bool           `json:"success"`
		Err     string          `json:"err"`
		Result  json.RawMessage `json:"result"`
	}
	dec := json.NewDecoder(io.LimitReader(conn, maxControlReply))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return fmt.Errorf("reading the sentry's reply to %s (at most %d bytes of JSON): %w", method, maxControlReply, bounded(err))
	}
	if rep.Success == nil {
		return fmt.Errorf("the sentry's reply to %s has no success field", method)
	}
	if !*rep.Success {
		return fmt.Errorf("%w: %s: %q", errRefused, method, truncate(rep.Err, maxSentryError))
	}
	if r := string(rep.Result); r != "" && r != "null" && r != "{}" {
		return fmt.Errorf("the sentry's reply to %s has an unexpected result of %d bytes", method, len(r))
	}
	return nil
}

// readProbeReply reads the sentry's answer to sentryProbe until it is
// probeReply (nil), differs from it (errOtherFormat), or ends or times
// out before it is whole (the read's error: no answer yet).
func readProbeReply(conn net.Conn) error {
	got := make([]byte, 0, len(probeReply))
	buf := make([]byte, len(probeReply))
	for len(got) < len(probeReply) {
		n, err := conn.Read(buf[:len(probeReply)-len(got)])
		got = append(got, buf[:n]...)
		if !strings.HasPrefix(probeReply, string(got)) {
			return fmt.Errorf("%w: it answered an unknown method with %q", errOtherFormat, truncate(string(got), maxSentryError))
		}
		if err != nil && len(got) < len(probeReply) {
			return fmt.Errorf("reading the sentry's answer to a probe (%d bytes of it): %w", len(got), err)
		}
	}
	return nil
}

// truncate is s cut to at most n bytes, at a rune's start.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// bounded is err, or its text cut to maxSentryError bytes where the
// sentry's reply made it longer (the decoder quotes an unknown key whole).
func bounded(err error) error {
	if len(err.Error()) <= maxSentryError {
		return err
	}
	return errors.New(truncate(err.Error(), maxSentryError))
}

// closeLogged closes a control connection; a close error of a socket
// only read and written is of no consequence but is said.
func closeLogged(log *slog.Logger, c io.Closer) {
	if err := c.Close(); err != nil {
		log.Debug("closing the sentry's control connection", "err", err)
	}
}
