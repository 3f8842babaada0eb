package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// restError is E2B's REST error body; the SDKs read message from it.
type restError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeError answers a REST call with E2B's error body {"code", "message"}.
// The message is one line that says what is wrong and how to fix it.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	body, err := json.Marshal(restError{Code: status, Message: fmt.Sprintf(format, args...)})
	if err != nil { // cannot happen for a string and an int
		body = []byte(`{"code":500,"message":"encoding the error failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n')) // the client is gone if this fails
}

// connectError maps the Manager's errors to Connect errors the SDKs turn
// into their own (NotFoundError, TimeoutError, ...). A cause that is not
// the caller's is logged (slog's default logger, which `warden serve`
// sets) and answered as internal without detail, since it may name host
// paths.
func connectError(err error) error {
	var ce *connect.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, sandbox.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, errors.New("sandbox not found: it was killed or timed out; create a new one"))
	case errors.Is(err, sandbox.ErrPaced):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, sandbox.ErrBusy), sandbox.OutOfDescriptors(err):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: retry in a moment", err))
	case errors.Is(err, sandbox.ErrDead), errors.Is(err, sandbox.ErrClosed):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: create a new sandbox", err))
	case errors.Is(err, sandbox.ErrUnsupported):
		return connect.NewError(connect.CodeUnimplemented, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	slog.Error("e2b: internal error", "err", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error: see the server's log"))
}

// controlError is a control-plane answer other than success: its status
// and one-line message.
type controlError struct {
	status  int
	message string
}

func (e *controlError) Error() string { return e.message }

// badRequest is a 400 whose message names what is wrong and how to fix it.
func badRequest(format string, args ...any) error {
	return &controlError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeControlError answers a control-plane call that failed: its own
// controlError, or the status E2B gives the Manager's error. A cause that
// is not the caller's is logged and answered without detail.
func (s *Server) writeControlError(w http.ResponseWriter, err error) {
	var ce *controlError
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &ce):
		status = ce.status
	case errors.Is(err, sandbox.ErrNotFound):
		status = http.StatusNotFound
		err = errors.New(strings.TrimPrefix(err.Error(), sandbox.ErrNotFound.Error()+": "))
	case errors.Is(err, spec.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, sandbox.ErrTooMany), errors.Is(err, sandbox.ErrPaced), errors.Is(err, errFull):
		status = http.StatusTooManyRequests
	case errors.Is(err, sandbox.ErrBusy), errors.Is(err, sandbox.ErrClosed), errors.Is(err, sandbox.ErrDead):
		status = http.StatusConflict
	case errors.Is(err, sandbox.ErrUnsupported):
		status = http.StatusNotImplemented
	case sandbox.OutOfDescriptors(err):
		status = http.StatusServiceUnavailable
	default:
		s.log.Error("e2b: control plane", "err", err)
		writeError(w, status, "internal error: see the Warden server's log")
		return
	}
	writeError(w, status, "%s", oneLine(err.Error()))
}

// oneLine keeps the first line of a message, so every answer is one line.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
