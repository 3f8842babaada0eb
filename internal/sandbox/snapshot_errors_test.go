package sandbox

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
)

// TestSnapshotStorageError: a full or failing disk is answered as
// storage (507), a workspace over its bounds as invalid (400), and
// anything else as it came.
func TestSnapshotStorageError(t *testing.T) {
	other := errors.New("other")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"full", fmt.Errorf("copying %q: %w", "f", syscall.ENOSPC), state.ErrStorage},
		{"quota", syscall.EDQUOT, state.ErrStorage},
		{"read-only", syscall.EROFS, state.ErrStorage},
		{"too large", fmt.Errorf("%w: over", snapshot.ErrTooLarge), spec.ErrInvalid},
		{"other", other, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storageError(tc.err); !errors.Is(got, tc.want) {
				t.Errorf("storageError(%v) = %v, want it to be %v", tc.err, got, tc.want)
			}
		})
	}
}
