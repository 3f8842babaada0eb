package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

const (
	// maxHeaderBytes bounds a request's (and a response's) header.
	maxHeaderBytes = 64 << 10
	// headerTimeout bounds the wait for a complete request header, so an
	// idle connection cannot hold a slot for long.
	headerTimeout = 5 * time.Second
	// lingerTimeout and lingerBytes bound the draining of what a refused
	// client still sends: closing a unix socket with unread data makes
	// the peer's read fail with ECONNRESET, which would hide the answer.
	lingerTimeout = time.Second
	lingerBytes   = 256 << 10
	// maxReason bounds the reason line an agent reads.
	maxReason = 512
)

// exchange is one client connection: one request, then a tunnel or one
// forwarded response.
type exchange struct {
	a *Attachment
	c clientConn
	// first is what receive read of the request before c.
	first []byte
	br    *bufio.Reader
	ev    spec.NetworkEvent
}

// serve answers one connection, or the sandbox connection handed over on
// it, and records its decision.
func (a *Attachment) serve(uc *net.UnixConn) {
	defer a.wg.Done()
	if !a.track(uc) {
		return
	}
	c, first, err := receive(uc)
	if errors.Is(err, errLostHandOff) {
		a.log.add(spec.NetworkEvent{Time: time.Now().UTC().Format(time.RFC3339Nano), Reason: err.Error()})
	}
	if err != nil {
		a.untrack(uc)
		return
	}
	if c != clientConn(uc) {
		a.untrack(uc)
		if !a.track(c) {
			return
		}
	}
	defer a.untrack(c)
	open := a.conns.Add(1)
	defer a.conns.Add(-1)
	// Connections still sending their header count too: past twice the
	// cap (room for the 429s) or the process-wide cap, close at once,
	// before anything is read or buffered.
	if open > 2*int64(a.policy.Load().MaxConns) || !acquireConn() {
		return
	}
	defer releaseConn()

	x := &exchange{a: a, c: c, first: first, ev: spec.NetworkEvent{Time: time.Now().UTC().Format(time.RFC3339Nano)}}
	req, status, reason := x.readRequest()
	if req == nil {
		if status != 0 {
			x.refuse(status, reason)
		}
		return
	}
	x.ev.Method = clip(req.Method)
	host, port, err := target(req)
	if err != nil {
		x.refuse(http.StatusBadRequest, err.Error())
		return
	}
	x.ev.Host, x.ev.Port = clip(host), port
	pol := a.policy.Load()
	v := pol.check(host, port)
	if v.literal.IsValid() {
		x.ev.Address = v.literal.String()
	}
	switch {
	case v.status != 0:
		x.refuse(v.status, v.reason)
		return
	case !a.budgetLeft():
		x.refuse(http.StatusForbidden, fmt.Sprintf("byte limit reached: the sandbox may move %d bytes in all", pol.MaxBytes))
		return
	case open > int64(pol.MaxConns):
		x.refuse(http.StatusTooManyRequests, fmt.Sprintf("too many connections: at most %d at once", pol.MaxConns))
		return
	}
	up, status, reason := x.dial(pol, v, port)
	if up == nil {
		x.refuse(status, reason)
		return
	}
	if !a.track(up) {
		return
	}
	defer a.untrack(up)
	x.ev.Allowed, x.ev.Reason = true, v.reason
	i := a.log.add(x.ev)
	var m meters
	var note string
	if req.Method == http.MethodConnect {
		note = x.tunnel(up, &m)
	} else {
		note = x.forward(req, up, &m)
	}
	a.log.finish(i, m.up.Load(), m.down.Load(), note)
}

// readRequest reads one request header within the size and time bounds.
// It returns no request and status 0 when the client left without a byte.
func (x *exchange) readRequest() (*http.Request, int, string) {
	lr := &io.LimitedReader{R: io.MultiReader(bytes.NewReader(x.first), x.c), N: maxHeaderBytes}
	x.br = bufio.NewReaderSize(lr, 32<<10)
	// A socket refuses a deadline only once closed: the client is gone,
	// and a read without its bound is never begun.
	if err := x.c.SetReadDeadline(time.Now().Add(headerTimeout)); err != nil {
		return nil, 0, ""
	}
	req, err := http.ReadRequest(x.br)
	_ = x.c.SetReadDeadline(time.Time{}) // fails only once closed, as the next read then does
	left := lr.N
	lr.N = math.MaxInt64
	switch {
	case err == nil:
		return req, 0, ""
	case errors.Is(err, io.EOF) && left == maxHeaderBytes:
		return nil, 0, ""
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, http.StatusRequestTimeout, fmt.Sprintf("no complete request header within %s", headerTimeout)
	case left == 0:
		return nil, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request header larger than %d KiB", maxHeaderBytes>>10)
	}
	return nil, http.StatusBadRequest, "malformed request: " + err.Error()
}

// target extracts the host and port a request asks for: the authority of
// a CONNECT, or the host of an absolute http:// URL.
func target(req *http.Request) (string, int, error) {
	var host, port string
	if req.Method == http.MethodConnect {
		h, p, err := net.SplitHostPort(req.RequestURI)
		if err != nil || h == "" {
			return "", 0, errors.New("CONNECT needs host:port")
		}
		host, port = h, p
	} else {
		u := req.URL
		switch {
		case u.Scheme == "":
			return "", 0, errors.New("this is a proxy: ask for an absolute http://host/path URL, or CONNECT host:port")
		case u.Scheme == "https":
			return "", 0, errors.New("https:// goes through CONNECT host:443")
		case u.Scheme != "http":
			return "", 0, fmt.Errorf("scheme %q is not supported: use http:// or CONNECT", u.Scheme)
		case u.Host == "":
			return "", 0, errors.New("the URL has no host")
		}
		host, port = u.Hostname(), u.Port()
		if port == "" {
			port = "80"
		}
	}
	p, ok := parsePort(port)
	if !ok {
		return "", 0, fmt.Errorf("port %q is not in 1..65535", port)
	}
	return normHost(host), p, nil
}

// refuse records the denial and answers it with one text/plain line,
// then closes gently so the client reads the answer rather than a reset.
func (x *exchange) refuse(status int, reason string) {
	reason = oneLine(reason)
	x.ev.Allowed, x.ev.Reason = false, reason
	x.a.log.add(x.ev)
	line := "warden egress: " + reason
	if x.ev.Host != "" {
		verb := "failed"
		switch status {
		case http.StatusForbidden:
			verb = "denied"
		case http.StatusTooManyRequests:
			verb = "refused"
		case http.StatusBadRequest:
			verb = "bad request for"
		}
		hostport := net.JoinHostPort(x.ev.Host, strconv.Itoa(x.ev.Port))
		line = "warden egress: " + verb + " " + hostport + ": " + reason
	} else if status < 500 {
		line = "warden egress: bad request: " + reason
	}
	line = oneLine(line)
	fmt.Fprintf(x.c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, http.StatusText(status), len(line)+1, line)
	_ = x.c.CloseWrite() // fails only once closed, when there is nothing left to answer
	// Lingering only drains what the client still sends, so that closing
	// does not reset the answer away. Without its deadline there is no
	// drain.
	if x.c.SetReadDeadline(time.Now().Add(lingerTimeout)) == nil {
		_, _ = io.CopyN(io.Discard, x.c, lingerBytes) // a failed drain changes nothing
	}
}

// oneLine makes s safe as a single short line of text: control
// characters become spaces and the length is bounded.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "") + "..."
	}
	return s
}

// maxEventField bounds the text an audit event keeps of what the sandbox
// sent: the log is the sandbox's to fill, and must not grow the Warden
// process by more than a few MiB.
const maxEventField = 256

func clip(s string) string {
	if len(s) <= maxEventField {
		return s
	}
	return strings.ToValidUTF8(s[:maxEventField], "") + "..."
}

// maxOpenConns bounds the client connections of every sandbox together,
// far below the descriptors a Warden process has: one sandbox opening
// connections by the thousand must not starve the others, or the API.
const maxOpenConns = 4096

var openConns = make(chan struct{}, maxOpenConns)

func acquireConn() bool {
	select {
	case openConns <- struct{}{}:
		return true
	default:
		return false
	}
}

func releaseConn() { <-openConns }
