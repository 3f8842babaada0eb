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

// managerAnswer is how each of the APIs answers one kind of the
// Manager's errors: the Connect code (envd's process and filesystem
// services), the control plane's status, and the data plane's REST
// status (the code interpreter), where a sandbox that is gone answers
// 502, which the SDK reports as a sandbox timeout, as it does for a
// sandbox E2B killed. advice, when set, is appended to the message on
// Connect and the data plane, saying what the caller can do; the control
// plane's own messages already say it.
type managerAnswer struct {
	is      func(error) bool
	code    connect.Code
	control int
	data    int
	advice  string
}

// isErr is a managerAnswer.is for a sentinel error.
func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// managerAnswers is the one table of how the Manager's errors answer;
// the first row that matches wins. An error no row matches is internal.
var managerAnswers = []managerAnswer{
	{isErr(sandbox.ErrNotFound), connect.CodeNotFound, http.StatusNotFound, http.StatusBadGateway, "it was killed or timed out: create a new one"},
	{isErr(sandbox.ErrDead), connect.CodeFailedPrecondition, http.StatusConflict, http.StatusBadGateway, "its box ended: create a new one"},
	{isErr(sandbox.ErrClosed), connect.CodeFailedPrecondition, http.StatusConflict, http.StatusBadGateway, "its box ended: create a new one"},
	{isErr(spec.ErrInvalid), connect.CodeInvalidArgument, http.StatusBadRequest, http.StatusBadRequest, ""},
	{isErr(sandbox.ErrTooMany), connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests, ""},
	{isErr(sandbox.ErrPaced), connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests, ""},
	{isErr(errFull), connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests, ""},
	{isErr(sandbox.ErrBusy), connect.CodeUnavailable, http.StatusConflict, http.StatusServiceUnavailable, "retry in a moment"},
	{isErr(sandbox.ErrNoChannel), connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests, "kill a command or delete a code context"},
	{sandbox.OutOfDescriptors, connect.CodeUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable, "retry in a moment"},
	{isErr(sandbox.ErrUnsupported), connect.CodeUnimplemented, http.StatusNotImplemented, http.StatusNotImplemented, ""},
}

// answerOf is the row of managerAnswers that err matches.
func answerOf(err error) (managerAnswer, bool) {
	for _, a := range managerAnswers {
		if a.is(err) {
			return a, true
		}
	}
	return managerAnswer{}, false
}

// advised is err's line for the caller (tenantLine) with the row's
// advice, if any.
func (a managerAnswer) advised(err error) string {
	if a.advice == "" {
		return tenantLine(err)
	}
	return tenantLine(err) + ": " + a.advice
}

// publicError is an error whose full line is for the operator (it may
// name a host path, a pid, runsc's output) and whose Public line is for
// the tenant, such as sandbox.PauseError: E2B answers it with Public, as
// Warden's own API does (internal/server's publicAPIError).
type publicError interface {
	error
	Public() string
}

// tenantLine is what a caller is told of err: its Public line where it
// has one, else its message.
func tenantLine(err error) string {
	var pub publicError
	if errors.As(err, &pub) {
		return pub.Public()
	}
	return err.Error()
}

// logPublic logs the full line of an error answered by its Public line,
// so the operator has what the tenant was not told.
func logPublic(log *slog.Logger, err error) {
	var pub publicError
	if errors.As(err, &pub) {
		log.Warn("e2b: request refused", "err", err)
	}
}

// connectError maps the Manager's errors to Connect errors the SDKs turn
// into their own (NotFoundError, TimeoutError, ...), by managerAnswers. A
// cause that is not the caller's is logged (slog's default logger, which
// `warden serve` sets) and answered as internal without detail, since it
// may name host paths.
func connectError(err error) error {
	var ce *connect.Error
	if err == nil {
		return nil
	}
	if errors.As(err, &ce) {
		return ce
	}
	if a, ok := answerOf(err); ok {
		logPublic(slog.Default(), err)
		return connect.NewError(a.code, errors.New(a.advised(err)))
	}
	switch {
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
// controlError, or the status E2B gives the Manager's error, with its
// Public line where it has one (tenantLine; the full line is logged). A
// cause that is not the caller's is logged and answered without detail.
func (s *Server) writeControlError(w http.ResponseWriter, err error) {
	var ce *controlError
	a, known := answerOf(err)
	switch {
	case errors.As(err, &ce):
		writeError(w, ce.status, "%s", oneLine(err.Error()))
	case known:
		logPublic(s.log, err)
		msg := strings.TrimPrefix(tenantLine(err), sandbox.ErrNotFound.Error()+": ")
		writeError(w, a.control, "%s", oneLine(msg))
	default:
		s.log.Error("e2b: control plane", "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: see the Warden server's log")
	}
}

// oneLine is s on one line, line breaks made spaces, so every answer is
// one line and keeps all of its message.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
