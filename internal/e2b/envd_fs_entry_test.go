package e2b

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// TestFSPermissionErrors: only the workspace's own permission errors are
// answered as permission_denied with their message; any other that
// matches fs.ErrPermission (an *os.PathError from the host's state
// directory) may name a host path, and is a logged internal error.
func TestFSPermissionErrors(t *testing.T) {
	host := &fs.PathError{Op: "open", Path: "/var/lib/warden/state/ses_1", Err: syscall.EACCES}
	own := fmt.Errorf("listing %q: %w", "/workspace/x", errors.Join(workspace.ErrDenied, syscall.EACCES))
	tests := []struct {
		name   string
		err    error
		code   connect.Code
		status int
	}{
		{"host path", host, connect.CodeInternal, http.StatusInternalServerError},
		{"wrapped host path", fmt.Errorf("opening the workspace: %w", host), connect.CodeInternal, http.StatusInternalServerError},
		{"workspace's own", own, connect.CodePermissionDenied, http.StatusForbidden},
		{"a watch of remote files", fmt.Errorf("watching %q: served by its agent: %w", "/workspace", errors.ErrUnsupported), connect.CodeUnimplemented, http.StatusNotImplemented},
	}
	for _, tt := range tests {
		var ce *connect.Error
		if !errors.As(fsConnectError(tt.err), &ce) || ce.Code() != tt.code {
			t.Errorf("%s: Connect error %v, want code %v", tt.name, ce, tt.code)
		} else if tt.code == connect.CodeInternal && strings.Contains(ce.Message(), "/var/lib") {
			t.Errorf("%s: message %q names a host path", tt.name, ce.Message())
		}
		if got := fsStatus(tt.err); got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.status)
		}
	}
}

// TestOwnerNames: the sandbox user's ids are "user", 0 is "root", others
// their number; when the files cannot say whom they act as (-1), every id
// but 0 is "user", never 4294967295.
func TestOwnerNames(t *testing.T) {
	tests := []struct {
		id   uint32
		user int
		want string
	}{
		{1000, 1000, e2bUser},
		{0, 1000, "root"},
		{1001, 1000, "1001"},
		{1000, -1, e2bUser},
		{0, -1, "root"},
		{4294967295, 1000, "4294967295"},
	}
	for _, tt := range tests {
		if got := (owners{}).name(tt.id, tt.user); got != tt.want {
			t.Errorf("name(%d, user %d) = %q, want %q", tt.id, tt.user, got, tt.want)
		}
	}
}
