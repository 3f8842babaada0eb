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
// or not, BodyReadTimeout to send it: a read of the body past that fails,
// and so does net/http's drain of a body the handler left unread, which
// closes the connection. Without it a client that declares a body and
// never sends it holds its connection, its goroutine and whatever its
// handler holds for as long as it likes. Uploads push the deadline on as
// long as they keep sending (pacedBody).
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
		fmt.Sprintf("request body did not arrive in time: send a JSON body whole within %s and an upload without pausing for %s", d, d)}
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

// pacedBody is an upload's body that must keep arriving: before each read
// it moves the connection's read deadline to timeout from now, so an
// upload of any size goes on while bytes flow and is cut off once none
// have come for timeout. After the body's end or an error it sets no
// deadline again, as net/http's own read of the idle connection must not
// inherit one.
type pacedBody struct {
	r       io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	ended   bool
	stalled bool // a read failed at the deadline
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if !p.ended {
		if err := p.rc.SetReadDeadline(time.Now().Add(p.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return 0, fmt.Errorf("setting the upload's read deadline: %w", err)
		}
	}
	n, err := p.r.Read(b)
	if err != nil {
		p.ended = true
		p.stalled = p.stalled || errors.Is(err, os.ErrDeadlineExceeded)
	}
	return n, err
}

func (p *pacedBody) Close() error { return p.r.Close() }
