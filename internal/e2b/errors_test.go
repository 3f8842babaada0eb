package e2b

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestManagerErrorsAgree: each of the Manager's errors, wrapped as the
// Manager wraps them, answers by the one table on Connect, the control
// plane and the data plane, with advice where the table gives it; none
// falls through to "internal error".
func TestManagerErrorsAgree(t *testing.T) {
	tests := []struct {
		err     error
		code    connect.Code
		control int
		data    int
	}{
		{sandbox.ErrNotFound, connect.CodeNotFound, http.StatusNotFound, http.StatusBadGateway},
		{sandbox.ErrDead, connect.CodeFailedPrecondition, http.StatusConflict, http.StatusBadGateway},
		{sandbox.ErrClosed, connect.CodeFailedPrecondition, http.StatusConflict, http.StatusBadGateway},
		{spec.ErrInvalid, connect.CodeInvalidArgument, http.StatusBadRequest, http.StatusBadRequest},
		{sandbox.ErrTooMany, connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests},
		{sandbox.ErrNoChannel, connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests},
		{sandbox.ErrPaced, connect.CodeResourceExhausted, http.StatusTooManyRequests, http.StatusTooManyRequests},
		{sandbox.ErrBusy, connect.CodeUnavailable, http.StatusConflict, http.StatusServiceUnavailable},
		{sandbox.ErrUnsupported, connect.CodeUnimplemented, http.StatusNotImplemented, http.StatusNotImplemented},
	}
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			err := fmt.Errorf("session ses_1: %w", tt.err)
			a, ok := answerOf(err)
			if !ok {
				t.Fatal("no row of managerAnswers matches")
			}
			if got := connect.CodeOf(connectError(err)); got != tt.code {
				t.Errorf("Connect code %v, want %v", got, tt.code)
			}
			w := httptest.NewRecorder()
			s.writeControlError(w, err)
			if w.Code != tt.control {
				t.Errorf("control status %d, want %d", w.Code, tt.control)
			}
			ref := interpRefusalOf(err)
			if ref.status != tt.data {
				t.Errorf("data status %d, want %d", ref.status, tt.data)
			}
			if want := a.advised(err); ref.msg != want || connectError(err).(*connect.Error).Message() != want { //nolint:errorlint // connectError makes a *connect.Error itself: the test checks that exact value
				t.Errorf("messages %q and %q, want both %q", ref.msg, connectError(err).(*connect.Error).Message(), want) //nolint:errorlint // as above
			}
		})
	}
	if got := connect.CodeOf(connectError(errors.New("disk on fire"))); got != connect.CodeInternal {
		t.Errorf("an unknown error answers %v, want internal", got)
	}
}

// TestOneLine: every answer's message is one line and keeps all its text.
func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "plain",
		"a\nb":         "a b",
		"a\r\nb\rc\nd": "a  b c d",
	} {
		if got := oneLine(in); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
