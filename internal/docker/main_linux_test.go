package docker

import (
	"os"
	"runtime"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// init pins the main goroutine to the main thread, as cmd/warden does:
// the test binary is also the init the live tests bind into their boxes.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if nsinit.IsInit(os.Args) {
		nsinit.Main()
	}
	os.Exit(m.Run())
}
