package mcp

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// init pins the main goroutine to the main thread, as cmd/warden does:
// the test binary is also the init of the sandboxes the live test starts.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if nsinit.IsInit(os.Args) {
		nsinit.Main()
	}
	os.Exit(m.Run())
}

// TestMCPLiveNotebook drives real sandboxes through the tools, in memory:
// Python state across calls, a matplotlib chart as a PNG image, a timeout
// that keeps the session, and the client's sessions gone when it leaves.
func TestMCPLiveNotebook(t *testing.T) {
	testhost.RequireRoot(t)
	limits := spec.DefaultLimits
	limits.Timeout = 30 * time.Second
	mgr := sandbox.NewManager(sandbox.Native{}, sandbox.Config{MaxSessions: 4, DefaultLimits: limits})
	t.Cleanup(func() { mgr.Close() })
	cs, done := connect(t, mgr, Options{Owner: "mcp"})

	id := sessionID(t, call(t, cs, "create_session", nil))
	if res := call(t, cs, "run_code", map[string]any{"language": "python", "code": "x = 41", "session_id": id}); res.IsError {
		t.Fatalf("x = 41: %s", text(t, res))
	}
	if res := call(t, cs, "run_code", map[string]any{"language": "python", "code": "x + 1", "session_id": id}); !strings.Contains(text(t, res), "42") {
		t.Errorf("x + 1 = %q, want 42: state must persist", text(t, res))
	}
	chart := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')"
	res := call(t, cs, "run_code", map[string]any{"language": "python", "code": chart, "session_id": id})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("chart = error %v, %q, %d contents; want text and one image", res.IsError, text(t, res), len(res.Content))
	}
	if img, ok := res.Content[1].(*sdk.ImageContent); !ok || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("chart content = %T, want a PNG image", res.Content[1])
	}

	res = call(t, cs, "run_code", map[string]any{"language": "python", "code": "import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 4])\n6 * 7"})
	if res.IsError || len(res.Content) != 2 || !strings.Contains(text(t, res), "42") {
		t.Errorf("one-off chart = error %v, %q, %d contents; want the value and an image", res.IsError, text(t, res), len(res.Content))
	}
	if n := len(mgr.List("mcp")); n != 1 {
		t.Errorf("%d sessions after a one-off run_code, want only the open one", n)
	}

	res = call(t, cs, "run_code", map[string]any{"language": "python", "code": "while True: pass", "session_id": id, "timeout_seconds": 1})
	if !res.IsError || !strings.HasPrefix(text(t, res), "timed out after 1s; the session and its files are kept") {
		t.Errorf("endless loop = error %v, %q; want a timeout that keeps the session", res.IsError, text(t, res))
	}
	if res := call(t, cs, "run_command", map[string]any{"argv": []string{"echo", "alive"}, "session_id": id}); res.IsError || !strings.Contains(text(t, res), "alive") {
		t.Errorf("after the timeout: %q", text(t, res))
	}

	cs.Close()
	select {
	case <-done: //nolint:errcheck // a wait for the goroutine to end: its result is not what this test checks
	case <-time.After(testTimeout):
		t.Fatal("Run did not return after the client disconnected")
	}
	if left := mgr.List("mcp"); len(left) != 0 {
		t.Errorf("sessions after disconnect = %d, want none", len(left))
	}
}
