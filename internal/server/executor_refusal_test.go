package server

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/nsinit"
)

// TestExecutorRefusalAnswer: a server on --executor fast refuses a run
// warden-exec will not build with 501 unsupported naming the request's
// feature, and a missing or broken warden-exec with 503 unavailable;
// neither answer names a flag or a host path, which only the log gets.
func TestExecutorRefusalAnswer(t *testing.T) {
	tests := []struct {
		name   string
		why    error
		status int
		code   string
		want   string
	}{
		{"proxy", &nsinit.NotFastError{Feature: "--net proxy (the egress bridge)"}, 501, codeUnsupported,
			"this server builds one-shot runs only with warden-exec, which cannot build --net proxy (the egress bridge): use a session"},
		{"root detail", &nsinit.NotFastError{Feature: "the root on this host", Detail: "reading /proc/self/mountinfo: denied"}, 501, codeUnsupported,
			"this server builds one-shot runs only with warden-exec, which cannot build the root on this host: use a session"},
		{"missing", errors.New("warden-exec not found next to /usr/local/bin/warden-server; run make build"), 503, codeUnavailable,
			"this server builds one-shot runs only with warden-exec, which is unavailable on it: ask its operator (the server log says why)"},
		{"descriptors", fmt.Errorf("warden-exec: opening: %w", syscall.EMFILE), 503, codeUnavailable,
			"this server builds one-shot runs only with warden-exec, which is unavailable on it: ask its operator (the server log says why)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fmt.Errorf("run: %w", &native.ExecutorRefusedError{Why: tt.why})
			ae := toAPIError(err)
			if ae.status != tt.status || ae.code != tt.code || ae.message != tt.want {
				t.Errorf("got %d %s %q, want %d %s %q", ae.status, ae.code, ae.message, tt.status, tt.code, tt.want)
			}
			for _, leak := range []string{"--executor", "/usr/", "/proc/"} {
				if strings.Contains(ae.message, leak) {
					t.Errorf("answer %q names %q", ae.message, leak)
				}
			}
			if !errors.Is(err, tt.why) {
				t.Errorf("%v does not wrap its cause %v", err, tt.why)
			}
		})
	}
}
