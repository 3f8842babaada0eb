package gvisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAwaitLoaded: a restored box's load counts as over when `runsc wait
// --restore` returns, whether it says the load ended or failed, and
// when the box ends while runsc still waits; not before.
func TestAwaitLoaded(t *testing.T) {
	tests := []struct {
		name, script string
		endBox       bool
	}{
		{name: "load ended", script: "exit 0"},
		{name: "load failed", script: "echo 'waiting for restore to complete: EIO' >&2; exit 128"},
		{name: "box ended first", script: "exec sleep 60", endBox: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := filepath.Join(dir, "args")
			runsc := filepath.Join(dir, "runsc")
			script := "#!/bin/sh\necho \"$@\" >" + args + "\n" + tt.script + "\n"
			if err := os.WriteFile(runsc, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			b := &box{r: &Runtime{}, runsc: runsc, id: "id", exited: make(chan struct{}), loaded: make(chan struct{})}
			go b.awaitLoaded()
			if tt.endBox {
				select {
				case <-b.loaded:
					t.Fatal("the load counted as over while runsc still waited and the box ran")
				case <-time.After(200 * time.Millisecond):
				}
				close(b.exited)
			}
			select {
			case <-b.loaded:
			case <-time.After(30 * time.Second):
				t.Fatal("the load never counted as over")
			}
			got, err := os.ReadFile(args)
			if err != nil || !strings.HasSuffix(strings.TrimSpace(string(got)), "wait --restore id") {
				t.Errorf("runsc was run with %q, %v; want it to end with wait --restore id", got, err)
			}
		})
	}
}

// TestLoadedUnknown: a session Warden did not restore in the background
// has nothing loading.
func TestLoadedUnknown(t *testing.T) {
	select {
	case <-(&Runtime{}).Loaded(nil):
	default:
		t.Error("Loaded of an unknown session is not closed")
	}
}
