package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// TestSnapshotStorageError: a full or failing disk is answered as
// storage (507), a workspace over its bounds as invalid (400), and
// anything else as it came.
func TestSnapshotStorageError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"full", fmt.Errorf("copying %q: %w", "f", syscall.ENOSPC), state.ErrStorage},
		{"quota", syscall.EDQUOT, state.ErrStorage},
		{"read-only", syscall.EROFS, state.ErrStorage},
		{"too large", fmt.Errorf("%w: over", snapshot.ErrTooLarge), spec.ErrInvalid},
		{"cancelled", fmt.Errorf("copying: %w", context.Canceled), context.Canceled},
		{"workspace", fmt.Errorf("reading: %w", workspace.ErrDenied), workspace.ErrDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := storageError(tc.err); !errors.Is(got, tc.want) {
				t.Errorf("storageError(%v) = %v, want it to be %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestSnapshotErrorHidesHostPaths: what the tenant is told of the store's
// own failures names no host path; the operator's log has it.
func TestSnapshotErrorHidesHostPaths(t *testing.T) {
	for _, err := range []error{
		&os.PathError{Op: "rename", Path: "/var/lib/warden/snapshots/.tmp-snap_x", Err: syscall.EACCES},
		&os.PathError{Op: "mkdir", Path: "/var/lib/warden/snapshots/.tmp-snap_x", Err: syscall.ENOSPC},
		&os.PathError{Op: "write", Path: "/var/lib/warden/snapshots/.tmp-snap_x/f", Err: syscall.EIO},
	} {
		got, public := storageError(err)
		if !public || strings.Contains(got.Error(), "/var/lib") {
			t.Errorf("storageError(%v) = %v, public %v; want a line without the host path", err, got, public)
		}
	}
}
