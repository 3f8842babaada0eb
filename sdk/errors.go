package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// APIError is an error answer from the server: its HTTP status and the
// body's stable code and human-readable message. Callers branch on Code
// (or use errors.Is with the Err* sentinels), never on Message, which may
// change between releases.
type APIError struct {
	// StatusCode is the HTTP status; 200 for an error event ending a
	// stream, whose status was sent before the error happened.
	StatusCode int
	// Code is the API's error code; empty when the answer did not carry
	// Warden's error body (e.g. a proxy in between failed).
	Code ErrorCode
	// Message explains the error for humans.
	Message string
}

// Error formats the error as "warden: not_found: session ses_… not found".
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("warden: HTTP %d: %s", e.StatusCode, e.Message)
	}
	return fmt.Sprintf("warden: %s: %s", e.Code, e.Message)
}

// Is reports whether target is an *APIError with the same Code, so that
// errors.Is(err, sdk.ErrNotFound) works through wrapping without callers
// needing errors.As.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code != "" && t.Code == e.Code
}

// Sentinels, one per error code of the API, so callers can write
// errors.Is(err, sdk.ErrTooManySessions) through any wrapping; only Code is
// compared.
var (
	ErrBadRequest      = &APIError{StatusCode: http.StatusBadRequest, Code: ErrorCodeBadRequest, Message: "bad request"}
	ErrUnauthorized    = &APIError{StatusCode: http.StatusUnauthorized, Code: ErrorCodeUnauthorized, Message: "unauthorized"}
	ErrNotFound        = &APIError{StatusCode: http.StatusNotFound, Code: ErrorCodeNotFound, Message: "not found"}
	ErrConflict        = &APIError{StatusCode: http.StatusConflict, Code: ErrorCodeConflict, Message: "conflict"}
	ErrRequestTimeout  = &APIError{StatusCode: http.StatusRequestTimeout, Code: ErrorCodeRequestTimeout, Message: "request timeout"}
	ErrPayloadTooLarge = &APIError{StatusCode: http.StatusRequestEntityTooLarge, Code: ErrorCodePayloadTooLarge, Message: "payload too large"}
	ErrTooManySessions = &APIError{StatusCode: http.StatusTooManyRequests, Code: ErrorCodeTooManySessions, Message: "too many sessions"}
	ErrUnsupported     = &APIError{StatusCode: http.StatusNotImplemented, Code: ErrorCodeUnsupported, Message: "unsupported"}
	ErrInternal        = &APIError{StatusCode: http.StatusInternalServerError, Code: ErrorCodeInternal, Message: "internal error"}
	ErrUnavailable     = &APIError{StatusCode: http.StatusServiceUnavailable, Code: ErrorCodeUnavailable, Message: "unavailable"}
	// ErrInsufficientStorage says the server cannot record a new session:
	// its state directory is full or read-only.
	ErrInsufficientStorage = &APIError{StatusCode: http.StatusInsufficientStorage, Code: ErrorCodeInsufficientStorage, Message: "insufficient storage"}
)

// IsNotFound reports whether err says the session (or file) does not exist,
// typically because the session ended at its TTL or idle timeout.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err says the session is busy with another
// exec, or is dead (its sandbox died), or a path is in a state that
// forbids the operation. Retrying after the running exec ends may succeed
// when it was busy; a dead session never runs again, whatever the retry:
// only its files may be read (if the server keeps workspaces), so delete
// it and create another. The API's error body does not tell busy from
// dead apart except in its human-readable Message.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsTooManySessions reports whether err says the server's concurrent
// session limit is reached; closing a session or waiting frees a slot.
func IsTooManySessions(err error) bool { return errors.Is(err, ErrTooManySessions) }

// maxErrorBody bounds how much of an error answer is read: Warden's error
// bodies are small, and a misbehaving proxy's page need not be kept whole.
const maxErrorBody = 64 << 10

// errorFromResponse turns a non-success answer into an *APIError, reading
// Warden's error body when there is one and a snippet of the body otherwise.
func errorFromResponse(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return fmt.Errorf("warden: reading HTTP %d answer: %w", resp.StatusCode, err)
	}
	var er ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error.Code != "" {
		return &APIError{StatusCode: resp.StatusCode, Code: er.Error.Code, Message: er.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{StatusCode: resp.StatusCode, Message: msg}
}

// decodeJSON checks that a call got the status it wants and decodes the
// JSON body into a T. It takes the call's own results so every helper
// handles transport errors, error answers and closing the body alike.
func decodeJSON[T any](op string, resp *http.Response, err error, want int) (*T, error) {
	if err := check(op, resp, err, want); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var v T
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, fmt.Errorf("warden: %s: decoding answer: %w", op, err)
	}
	return &v, nil
}

// expectNoContent is decodeJSON for calls that answer without a body.
func expectNoContent(op string, resp *http.Response, err error) error {
	if err := check(op, resp, err, http.StatusNoContent); err != nil {
		return err
	}
	return resp.Body.Close()
}

// check wraps a transport error with the operation's name, or turns an
// unwanted status into an *APIError (closing the body); on success the
// caller owns the body.
func check(op string, resp *http.Response, err error, want int) error {
	if err != nil {
		return fmt.Errorf("warden: %s: %w", op, err)
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		return errorFromResponse(resp)
	}
	return nil
}
