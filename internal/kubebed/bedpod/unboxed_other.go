//go:build !linux

package bedpod

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// Unboxed skips t off Linux (fails it under WARDEN_CI=1): a Pod's init
// needs Linux's namespaces.
func Unboxed(t testing.TB) kubebed.PodCommand {
	t.Helper()
	testhost.SkipOrFail(t, "a Pod's Warden init needs Linux")
	return nil
}
