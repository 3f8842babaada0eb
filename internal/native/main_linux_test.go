package native

import (
	"os"
	"runtime"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// init pins the main goroutine to the main thread, as cmd/warden does:
// the test binary is also the sandbox init the live tests start.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if nsinit.IsInit(os.Args) {
		nsinit.Main()
	}
	if isListenerProbe(os.Args) {
		listenerProbe()
	}
	if IsFontBuilder(os.Args) {
		if report := os.Getenv("WARDEN_TEST_BUILDER_REPORT"); report != "" {
			reportBuilder(report)
		}
		FontBuilderMain()
	}
	os.Exit(m.Run())
}
