package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAwaitRestored: a box runsc records running is restored, after a
// few answers that it is not yet, or after failures; a runsc state that
// fails every time is asked ever more seldom (at most every
// maxStatePoll) until ctx ends, and its error is named.
func TestAwaitRestored(t *testing.T) {
	tests := []struct {
		name, script string
		wantErr      string
	}{
		{name: "running", script: `echo '{"status":"running"}'`},
		{name: "created, then running", script: `[ "$(wc -l <"$CALLS")" -gt 3 ] && echo '{"status":"running"}' || echo '{"status":"created"}'`},
		{name: "fails, then running", script: `[ "$(wc -l <"$CALLS")" -gt 3 ] && echo '{"status":"running"}' || exit 1`},
		{name: "state fails", script: "echo 'loading container: permission denied' >&2; exit 1", wantErr: "runsc state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			runsc := filepath.Join(dir, "runsc")
			script := "#!/bin/sh\nCALLS=" + calls + "\necho x >>$CALLS\n" + tt.script + "\n"
			if err := os.WriteFile(runsc, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			b := &box{r: &Runtime{}, runsc: runsc, id: "id", exited: make(chan struct{})}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := b.awaitRestored(ctx)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("awaitRestored() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("awaitRestored() = %v, want an error naming %q", err, tt.wantErr)
			}
			// 25 ms doubling to 1 s: 7 asks in the first 1.6 s, one a
			// second after; 3 s at 25 ms would be 120.
			if data, _ := os.ReadFile(calls); strings.Count(string(data), "x") > 12 {
				t.Errorf("runsc state was run %d times in 3 s, want at most 12", strings.Count(string(data), "x"))
			}
		})
	}
}
