package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/interp"
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

// unpausableBackend starts boxes whose every pause fails as a box that
// cannot pause, with a host detail (pids, a uid) in the error, as a gVisor
// box whose control socket's listener is not its sentry does.
type unpausableBackend struct{ detail string }

func (unpausableBackend) Name() string { return "unpausable" }

func (b unpausableBackend) Start(context.Context, spec.Spec) (sandbox.Box, error) {
	return &unpausableBox{err: fmt.Errorf("%w: %s", sandbox.ErrUnsupported, b.detail), done: make(chan struct{})}, nil
}

func (unpausableBackend) Run(context.Context, spec.Spec, io.Reader, sandbox.Stream) (spec.Result, error) {
	return spec.Result{}, errors.ErrUnsupported
}

// unpausableBox is a box that only fails to pause and can be closed.
type unpausableBox struct {
	err  error
	done chan struct{}
	once sync.Once
}

func (x *unpausableBox) Pause(context.Context) error  { return x.err }
func (x *unpausableBox) Resume(context.Context) error { return nil }
func (x *unpausableBox) Spawn(context.Context, interp.Command) (interp.Process, error) {
	return nil, errors.ErrUnsupported
}
func (x *unpausableBox) Exec(context.Context, sandbox.Command, sandbox.Stream) (spec.Result, error) {
	return spec.Result{}, errors.ErrUnsupported
}
func (x *unpausableBox) Env(extra ...string) []string       { return extra }
func (x *unpausableBox) Workspace() *os.File                { return nil }
func (x *unpausableBox) FileOwner() (int, int)              { return 0, 0 }
func (x *unpausableBox) Usage() (time.Duration, uint64)     { return 0, 0 }
func (x *unpausableBox) SetNetwork(_, _ []string) error     { return nil }
func (x *unpausableBox) NetworkEvents() []spec.NetworkEvent { return nil }
func (x *unpausableBox) Done() <-chan struct{}              { return x.done }
func (x *unpausableBox) Err() error                         { return nil }
func (x *unpausableBox) Close() error                       { x.once.Do(func() { close(x.done) }); return nil }

// TestPauseErrorAnswersPublic: a box's pause that fails as one that
// cannot pause, its error naming host pids and a uid, answers E2B's
// control plane, Connect and the code interpreter with the PauseError's
// Public line (501 on the control plane), never with the host detail,
// which goes to the log, as Warden's own API answers it.
func TestPauseErrorAnswersPublic(t *testing.T) {
	const detail = "the control socket's listener is not the box's sentry, a runsc-sandbox child of runsc (pid 4242), but pid 3131 of uid 1717"
	m := sandbox.NewManager(unpausableBackend{detail: detail}, sandbox.Config{})
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	info, err := m.Create(ctx, "owner", sandbox.SessionOptions{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Pause(ctx, "owner", info.ID)
	var pe *sandbox.PauseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "pid 3131") {
		t.Fatalf("Pause() = %v, want a PauseError naming the host's pids", err)
	}
	var logged bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logged, nil))}
	w := httptest.NewRecorder()
	s.writeControlError(w, err)
	var body restError
	if jerr := json.Unmarshal(w.Body.Bytes(), &body); jerr != nil {
		t.Fatalf("control answer %q: %v", w.Body.String(), jerr)
	}
	for _, got := range []struct{ where, msg string }{
		{"control plane", body.Message},
		{"Connect", connectError(err).(*connect.Error).Message()}, //nolint:errorlint // connectError makes a *connect.Error itself
		{"code interpreter", interpRefusalOf(err).msg},
	} {
		if got.msg != pe.Public() {
			t.Errorf("%s answers %q, want the Public line %q", got.where, got.msg, pe.Public())
		}
		for _, leak := range []string{"4242", "3131", "1717", "uid"} {
			if strings.Contains(got.msg, leak) {
				t.Errorf("%s answers %q, which names the host's %q", got.where, got.msg, leak)
			}
		}
	}
	if w.Code != http.StatusNotImplemented {
		t.Errorf("control status %d, want 501", w.Code)
	}
	if !strings.Contains(logged.String(), "pid 3131") {
		t.Errorf("the log %q lacks the full line", logged.String())
	}
}
