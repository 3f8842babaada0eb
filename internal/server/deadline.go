package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// withBodyDeadline gives every request that carries a body, authenticated
// or not, BodyReadTimeout to start sending it. Without it a client that
// declares a body and never sends it holds its connection, its goroutine
// and whatever its handler holds for as long as it likes. The readers of
// bodies then push the deadline on as long as the body keeps coming
// (pacedBody).
func (s *Server) withBodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			s.setReadDeadline(w, time.Now().Add(s.cfg.BodyReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// setReadDeadline sets the connection's read deadline; the zero time
// clears it. Only a writer without a connection (as in tests through
// httptest.ResponseRecorder) cannot take one, and that is no error.
func (s *Server) setReadDeadline(w http.ResponseWriter, t time.Time) {
	err := http.NewResponseController(w).SetReadDeadline(t)
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.log.Warn("setting the read deadline of a request body", "err", err)
	}
}

// errBodyTimeout says what a read of a body that stopped arriving failed
// with.
func errBodyTimeout(d time.Duration) *apiError {
	return &apiError{http.StatusRequestTimeout, codeTimeout,
		fmt.Sprintf("request body did not arrive in time: send it without pausing for %s, at %d KiB/s on average or faster", d, minBodyRate>>10)}
}

// bodyReadError maps an error reading a request body: past its deadline
// is 408, past limit 413, anything else (a broken connection, bad
// chunking) 400.
func (s *Server) bodyReadError(err error, limit int64) *apiError {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errBodyTimeout(s.cfg.BodyReadTimeout)
	case errors.As(err, &mbe):
		return tooLarge(limit)
	}
	return badRequest("reading the request body: %s", oneLine(err))
}

// minBodyRate is the slowest average rate a request body may arrive at:
// besides never pausing for BodyReadTimeout, a body of n bytes must be
// whole within BodyReadTimeout + n/minBodyRate (8 MiB of JSON: 158 s; a
// 64 MiB upload: 17.5 min), so a client that trickles a byte now and
// then cannot hold its connection and its upload's files for ever.
const minBodyRate = 64 << 10 // bytes per second

// readDeadliner is what a pacedBody needs of the connection
// (http.ResponseController has it).
type readDeadliner interface{ SetReadDeadline(time.Time) error }

// pacedBody is a request body that must keep arriving: before each read
// it moves the connection's read deadline to timeout from now, but never
// past the body's overall bound (see minBodyRate), so a body of any size
// goes on while bytes flow and is cut off once none have come for
// timeout or it falls below the minimum rate. Once the body has ended or
// failed it clears the deadline, as net/http's own reads of the idle
// connection must not inherit one.
type pacedBody struct {
	r       io.ReadCloser
	dl      readDeadliner
	timeout time.Duration
	end     time.Time // the overall bound
	now     func() time.Time
	ended   bool
	stalled bool // a read failed at the deadline
}

// pace wraps r's body, of at most size bytes (its declared length when it
// has one), in a pacedBody.
func (s *Server) pace(w http.ResponseWriter, r *http.Request, size int64) *pacedBody {
	if r.ContentLength >= 0 {
		size = min(size, r.ContentLength)
	}
	now := time.Now
	return &pacedBody{
		r: r.Body, dl: http.NewResponseController(w), timeout: s.cfg.BodyReadTimeout, now: now,
		end: now().Add(s.cfg.BodyReadTimeout + time.Duration(size)*time.Second/minBodyRate),
	}
}

// extend pushes the overall bound back by d, the time the server itself
// made the body wait (for room in the memory budget).
func (p *pacedBody) extend(d time.Duration) { p.end = p.end.Add(d) }

func (p *pacedBody) Read(b []byte) (int, error) {
	if p.ended {
		return p.r.Read(b)
	}
	next := p.now().Add(p.timeout)
	if p.end.Before(next) {
		next = p.end
	}
	if err := supported(p.dl.SetReadDeadline(next)); err != nil {
		return 0, fmt.Errorf("setting the body's read deadline: %w", err)
	}
	n, err := p.r.Read(b)
	if err != nil {
		p.ended = true
		p.stalled = errors.Is(err, os.ErrDeadlineExceeded)
		if derr := supported(p.dl.SetReadDeadline(time.Time{})); derr != nil {
			return n, errors.Join(err, fmt.Errorf("clearing the body's read deadline: %w", derr))
		}
	}
	return n, err
}

func (p *pacedBody) Close() error { return p.r.Close() }

// answering bounds the connection of an answer that is about to be
// written. Each write of the answer must reach the client within the
// write timeout (renew), whatever the handler (a JSON answer, a download,
// an exec stream, /mcp's event streams), so a client that never reads,
// pipelining requests or not, cannot hold its connection, the handler's
// goroutine and what it holds (an open file) forever, while a long
// answer goes on as long as the client reads. An answer given before the
// request's body was read to its end (a 401, a 404, a 413, a handler that
// takes no body) lets net/http read on for at most answerLinger: it first
// reads and drops up to 256 KiB of the body, for as long as
// BodyReadTimeout would let it, with the connection busy all along. A
// body that stalls then closes the connection; one that goes on past
// 256 KiB makes net/http close it gently (the answer first, then a
// pause), so a client still sending reads its answer rather than a reset.
// (Saying Connection: close would skip that read, and the close would
// reset a socket that still holds the client's data, answer and all.)
func (r *recorder) answering() {
	if r.body != nil && !r.body.ended {
		r.s.setReadDeadline(r.ResponseWriter, r.now().Add(answerLinger))
	}
	r.renew()
}

// answerLinger is how long the rest of a body is still read after its
// answer went out before it ended: long enough for a client still sending
// to read its answer, short enough that an unread body holds a connection
// for about a second.
const answerLinger = time.Second

// renew moves the write deadline to the write timeout from now.
func (r *recorder) renew() { r.s.setWriteDeadline(r.ResponseWriter, r.now().Add(r.timeout)) }

// setWriteDeadline sets the connection's write deadline, as
// setReadDeadline does the read deadline.
func (s *Server) setWriteDeadline(w http.ResponseWriter, t time.Time) {
	err := http.NewResponseController(w).SetWriteDeadline(t)
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.log.Warn("setting the write deadline of an answer", "err", err)
	}
}

// trackedBody is a request's body that knows whether it was read to its
// end, so the answer knows whether a part is still unread.
type trackedBody struct {
	io.ReadCloser
	ended bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.ended = true
	}
	return n, err
}
