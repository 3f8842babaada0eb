package e2b

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/e2b/filesystempb/filesystempbconnect"
	"github.com/warden-sandbox/warden/internal/e2b/processpb/processpbconnect"
)

// connectBodySlack is room past a service's largest message for the
// envelope and end frame of a streaming call's one request message.
const connectBodySlack = 64

// chargedBodies reads the body of each call of a Connect service on h with
// Config.ReadBody before Connect decodes it, so that it is charged to the
// sandbox owner's share of the server's body memory as Warden's own and
// the code interpreter's bodies are: without it 100 slow SendInput calls
// of 1.9 MB held 230 MB more of the server's memory. limit is the
// service's largest message. A call that streams its requests
// (StreamInput) is not read whole: its messages come one at a time, each
// within limit and the sandbox's stdin bound. A body the budget cannot
// hold now is resource_exhausted. A unary call's charge is held until
// it returns, since its decoded message lives that long (SendInput's
// stdin while it is written); a server stream's (Start, Connect,
// WatchDir: one small request, then a stream that may last hours) is
// given back once Connect has read the body, so that long streams do not
// fill the owner's share.
func (s *Server) chargedBodies(limit int64, h http.Handler) http.Handler {
	if s.cfg.ReadBody == nil {
		return h
	}
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sb := sandboxFrom(r.Context())
		if sb == nil || r.URL.Path == processpbconnect.ProcessStreamInputProcedure {
			h.ServeHTTP(w, r)
			return
		}
		buf, giveBack, err := s.cfg.ReadBody(w, r, sb.Owner, limit+connectBodySlack)
		release := func() {}
		if giveBack != nil {
			release = sync.OnceFunc(giveBack) // given back at EOF and at the end
		}
		defer release()
		if err != nil {
			if werr := errs.Write(w, r, connectBodyError(err)); werr != nil {
				s.log.Debug("e2b: answering a Connect body that could not be read", "err", werr)
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(buf))
		if serverStreams[r.URL.Path] {
			r.Body = &releasedAtEOF{buf: buf, release: release}
		}
		r.ContentLength = int64(len(buf))
		h.ServeHTTP(w, r)
	})
}

// serverStreams are the procedures whose one request starts a stream.
var serverStreams = map[string]bool{
	processpbconnect.ProcessStartProcedure: true, processpbconnect.ProcessConnectProcedure: true,
	filesystempbconnect.FilesystemWatchDirProcedure: true,
}

// releasedAtEOF is a body read whole that drops its buffer and gives its
// charge back once it has been read to its end.
type releasedAtEOF struct {
	buf     []byte
	release func()
}

func (b *releasedAtEOF) Read(p []byte) (int, error) {
	if len(b.buf) == 0 {
		b.buf = nil
		b.release()
		return 0, io.EOF
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// Close gives the charge back, read to the end or not.
func (b *releasedAtEOF) Close() error {
	b.buf = nil
	b.release()
	return nil
}

// connectBodyError is the Connect error for a body Config.ReadBody refused: too
// large or no room in the budget is resource_exhausted, a body that
// stopped arriving deadline_exceeded, the rest invalid_argument.
func connectBodyError(err error) *connect.Error {
	status := 0
	var st interface{ HTTPStatus() int }
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &st):
		status = st.HTTPStatus()
	case errors.As(err, &mbe):
		status = http.StatusRequestEntityTooLarge
	}
	switch status {
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("request body: %w", err))
	case http.StatusRequestTimeout:
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("request body: %w", err))
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("request body: %w", err))
}
