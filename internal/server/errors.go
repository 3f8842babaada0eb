package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// Error codes of the API's error body: the spec's ErrorCode enum, which
// TestErrorCodesMatchSpec holds these to. Clients switch on the code,
// never on the message.
const (
	codeBadRequest      = "bad_request"
	codeUnauthorized    = "unauthorized"
	codeNotFound        = "not_found"
	codeConflict        = "conflict"
	codeTimeout         = "request_timeout"
	codePayloadTooLarge = "payload_too_large"
	codeTooMany         = "too_many_sessions"
	codeInternal        = "internal"
	codeUnsupported     = "unsupported"
	codeUnavailable     = "unavailable"
	codeStorage         = "insufficient_storage"
)

// apiError is an answer the server chose to give: an HTTP status, the
// code clients switch on and one line a human can act on.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, codeBadRequest, fmt.Sprintf(format, args...)}
}

func tooLarge(limit int64) *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, codePayloadTooLarge,
		fmt.Sprintf("request body is larger than the %s limit", spec.FormatSize(limit))}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{http.StatusNotFound, codeNotFound, fmt.Sprintf(format, args...)}
}

// errorBody is the JSON every error answer carries:
// {"error":{"code":...,"message":...}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// toAPIError maps an error from the Manager, the workspace or the request
// decoding to the answer the client gets. Sentinels are matched with
// errors.Is, never by their text; anything unknown is a 500 that carries
// the error's message (one line, never a stack).
func toAPIError(err error) *apiError {
	var ae *apiError
	var mbe *http.MaxBytesError
	var paced *sandbox.StartPacedError
	var pub publicError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &pub):
		return publicAPIError(err, pub)
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.As(err, &paced):
		return &apiError{http.StatusTooManyRequests, codeTooMany, oneLine(err)}
	case errors.Is(err, sandbox.ErrNotFound):
		return &apiError{http.StatusNotFound, codeNotFound, "session not found"}
	case errors.Is(err, sandbox.ErrTooMany):
		return &apiError{http.StatusTooManyRequests, codeTooMany, tooManyMessage(err)}
	case errors.Is(err, sandbox.ErrDead):
		return &apiError{http.StatusConflict, codeConflict, oneLine(err)}
	case errors.Is(err, state.ErrStorage):
		return &apiError{http.StatusInsufficientStorage, codeStorage, oneLine(err)}
	case errors.Is(err, sandbox.ErrBusy):
		return &apiError{http.StatusConflict, codeConflict, busyMessage(err)}
	case errors.Is(err, sandbox.ErrClosed):
		// A stopping session will never serve again, so it answers as an
		// ended one does (the spec's 404: "or it has ended"), with a
		// message that says why.
		return &apiError{http.StatusNotFound, codeNotFound, err.Error()}
	case errors.Is(err, sandbox.ErrPaced):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, oneLine(err)}
	case errors.Is(err, sandbox.ErrNoChannel):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, oneLine(err) + noChannelHint}
	case sandbox.OutOfDescriptors(err):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, oneLine(err)}
	case errors.Is(err, sandbox.ErrUnsupported), errors.Is(err, errors.ErrUnsupported):
		return &apiError{http.StatusNotImplemented, codeUnsupported, oneLine(err)}
	case errors.Is(err, spec.ErrInvalid):
		return badRequest("%s", strings.TrimPrefix(oneLine(err), spec.ErrInvalid.Error()+": "))
	}
	if ae := workspaceError(err); ae != nil {
		return ae
	}
	return &apiError{http.StatusInternalServerError, codeInternal, oneLine(err)}
}

// noChannelHint ends the answer to an exec refused for want of stream
// channels: each interpreter the session started (default or named)
// holds some until the session ends, which this API cannot close.
const noChannelHint = ": run it in an interpreter the session already has, or create a new session"

// busyMessage is what a client is told of an ErrBusy: the Manager's
// reason (the session is paused again, being snapshotted: retry), which
// names no host detail, or the old line when it gives none.
func busyMessage(err error) string {
	if _, reason, ok := strings.Cut(oneLine(err), sandbox.ErrBusy.Error()+": "); ok && reason != "" {
		return reason
	}
	return "session is busy running another exec"
}

// publicError is an error whose full line is for the operator (it may
// name a flag or a host path) and whose Public line is for the tenant,
// such as native.ExecutorRefusedError: the server answers with Public
// and logs the full line (writeError).
type publicError interface {
	error
	Public() string
}

// publicAPIError answers pub with its Public line: 501 unsupported when
// err wraps errors.ErrUnsupported (the request asks for what this server
// cannot build), else 503 unavailable (the server cannot serve it now).
func publicAPIError(err error, pub publicError) *apiError {
	if errors.Is(err, errors.ErrUnsupported) {
		return &apiError{http.StatusNotImplemented, codeUnsupported, pub.Public()}
	}
	return &apiError{http.StatusServiceUnavailable, codeUnavailable, pub.Public()}
}

// tooManyMessage is what a client is told of an ErrTooMany: the
// Manager's own line, which says which bound was reached (the server's
// slots, the key's share, the key's memory budget and its flag) and
// counts only the caller's own sessions, or a generic line for the bare
// sentinel.
func tooManyMessage(err error) string {
	if msg := oneLine(err); msg != sandbox.ErrTooMany.Error() {
		return msg
	}
	return "too many sessions: delete one or wait for one to expire"
}

// workspaceError maps the workspace package's sentinels: a missing file
// is 404, a file over the size limit 413, a clash with what is there 409,
// and every other refusal (a bad path or mode, a link, a special file, a
// file the sandbox user may not touch) 400.
func workspaceError(err error) *apiError {
	switch {
	case errors.Is(err, workspace.ErrReadOnly), errors.Is(err, syscall.EROFS):
		return &apiError{http.StatusConflict, codeConflict, oneLine(err) + ": the session is dead and its files are read-only"}
	case errors.Is(err, workspace.ErrNotFound):
		return &apiError{http.StatusNotFound, codeNotFound, oneLine(err)}
	case errors.Is(err, workspace.ErrTooLarge):
		return &apiError{http.StatusRequestEntityTooLarge, codePayloadTooLarge, oneLine(err)}
	case errors.Is(err, workspace.ErrExists), errors.Is(err, workspace.ErrNotEmpty),
		errors.Is(err, workspace.ErrIsDir), errors.Is(err, workspace.ErrNotDir), errors.Is(err, workspace.ErrBusy):
		return &apiError{http.StatusConflict, codeConflict, oneLine(err)}
	case errors.Is(err, workspace.ErrBadPath), errors.Is(err, workspace.ErrBadMode),
		errors.Is(err, workspace.ErrNotRegular), errors.Is(err, workspace.ErrHardLink),
		errors.Is(err, workspace.ErrLink), errors.Is(err, fs.ErrPermission):
		return badRequest("%s", oneLine(err))
	}
	return nil
}

// oneLine keeps an error's message to its first line, so a multi-line
// error from a library never spills internals into an answer.
func oneLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimSpace(msg)
}

// writeError answers with err mapped to its status and JSON body; the
// log layer counts the refusal, for the request's tenant. A start refused
// for start or listing pacing says in Retry-After when the next may come.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	s.logPublic(err)
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="warden"`)
	}
	if secs, ok := retryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	writeJSON(w, ae.status, errorBody{errorDetail{ae.code, ae.message}})
}

// maxRetryAfter bounds Retry-After, in seconds: a client told to wait
// longer than an hour would better ask the operator, and a header with a
// huge number is a bug's, not an answer.
const maxRetryAfter = 3600

// retryAfter is the Retry-After of a start refused for start pacing or
// a listing refused for listing pacing: whole seconds, rounded up, so a
// client that waits that long is not refused again for it, and at most
// maxRetryAfter.
func retryAfter(err error) (int, bool) {
	var wait time.Duration
	var paced *sandbox.StartPacedError
	var listed *sandbox.ListPacedError
	switch {
	case errors.As(err, &paced):
		wait = paced.Wait
	case errors.As(err, &listed):
		wait = listed.Wait
	default:
		return 0, false
	}
	return min(maxRetryAfter, max(1, int(math.Ceil(wait.Seconds())))), true
}

// writeJSON answers with v as JSON. An encoding error can only come from
// the connection by then, so there is nobody left to tell.
func writeJSON(w http.ResponseWriter, status int, v any) {
	jsonHeader(w, status)
	_ = json.NewEncoder(w).Encode(v) // see above: nobody left to tell
}

// jsonHeader sends the header of a JSON answer.
func jsonHeader(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
}

// writeResult answers 200 with an exec's Result, its output streamed
// rather than built in memory first (spec.Result.WriteJSON). The small
// fields are encoded before the status is sent, so that a Result that
// cannot be encoded gets an error answer rather than a 200 with a cut
// body; once the status is sent, as in writeJSON, an error can only come
// from the connection.
func (s *Server) writeResult(w http.ResponseWriter, r spec.Result) {
	j, err := r.EncodeJSON()
	if err != nil {
		s.writeError(w, err)
		return
	}
	jsonHeader(w, http.StatusOK)
	_ = j.Write(w) // the client is gone if this fails
}

// logPublic logs the full line of an error whose answer is its Public
// line (publicError), which only the operator may read.
func (s *Server) logPublic(err error) {
	var pub publicError
	if errors.As(err, &pub) {
		s.log.Warn("request refused", "err", oneLine(err))
	}
}
