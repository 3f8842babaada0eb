package server

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestOutOfDescriptorsIsRetryable: a request the server could not serve
// for want of descriptors, or an exec refused by exec pacing or for want
// of stream channels, is a 503 (retry), not a 500.
func TestOutOfDescriptorsIsRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"named", fmt.Errorf("exec: %w", sandbox.ErrNoDescriptors)},
		{"EMFILE", &os.PathError{Op: "open", Path: "/dev/null", Err: syscall.EMFILE}},
		{"ENFILE", fmt.Errorf("pipe: %w", syscall.ENFILE)},
		{"exec pacing", fmt.Errorf("%w: the next may start in 1s", sandbox.ErrPaced)},
		{"stream full", fmt.Errorf("exec: %w (31 of 32 channels in use, 2 more wanted)", sandbox.ErrNoChannel)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toAPIError(tt.err); got.status != http.StatusServiceUnavailable || got.code != codeUnavailable {
				t.Errorf("toAPIError(%v) = %d %s, want 503 %s", tt.err, got.status, got.code, codeUnavailable)
			}
		})
	}
}

// TestNoChannelSaysHowToFreeOne: a stream at its channel bound is full of
// interpreters the API cannot close, so its answer says what the client
// can do instead (reuse one, or a new session), in one line.
func TestNoChannelSaysHowToFreeOne(t *testing.T) {
	err := fmt.Errorf("exec: %w (31 of 32 channels in use, 4 more wanted)", sandbox.ErrNoChannel)
	got := toAPIError(err)
	if !strings.HasSuffix(got.message, noChannelHint) || strings.Contains(got.message, "\n") {
		t.Errorf("toAPIError(%v).message = %q, want one line ending %q", err, got.message, noChannelHint)
	}
}
