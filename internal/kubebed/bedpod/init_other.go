//go:build !linux

package bedpod

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// Init skips t off Linux (fails it under WARDEN_CI=1): native Warden
// sandboxes need Linux.
func Init(t testing.TB) kubebed.PodCommand {
	t.Helper()
	testhost.SkipOrFail(t, "a Pod's Warden init in a native Warden sandbox needs Linux")
	return nil
}
