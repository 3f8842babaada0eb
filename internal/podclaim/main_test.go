package podclaim_test

import (
	"os"
	"testing"

	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
)

// TestMain serves as a Pod's stub instead of running the tests when the
// bed's kubelet started this binary as one (bedpod.Stub).
func TestMain(m *testing.M) {
	bedpod.ServeIfStub()
	os.Exit(m.Run())
}
