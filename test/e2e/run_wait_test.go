package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestRunWaitsInThePoller: while a sandbox runs, no thread of `warden
// run` sleeps in a blocking wait (the status read, the wait for
// warden-exec or the Go init): with one P, each would have its P retaken
// by the runtime's monitor and another thread woken for nothing. Both
// executors; a SIGTERM then ends the run.
func TestRunWaitsInThePoller(t *testing.T) {
	requireSandbox(t)
	for _, executor := range []string{"fast", "go"} {
		t.Run(executor, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, wardenBin, "run", "--executor", executor, "--", "sh", "-c", "echo ready; exec sleep 60")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The read ends at the program's line, or at EOF once warden
			// ends (ctx bounds it).
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				_ = cmd.Wait() // only reaps it; stderr says why
				t.Fatalf("warden run --executor %s: stdout %q, stderr %q; want the program's ready line", executor, line, stderr.String())
			}
			testhost.NoBlockedWaits(t, cmd.Process.Pid, 30)
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait() // a run ended by SIGTERM fails; that it ended is what counts
			if ctx.Err() != nil {
				t.Fatalf("warden run did not end within %s of its SIGTERM", cmdTimeout)
			}
		})
	}
}
