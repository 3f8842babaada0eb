package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestRootCmdForRun: `warden run` builds the run command alone and no
// completion command (newRootCmd), while help, shell completion and the
// completion command still see every command.
func TestRootCmdForRun(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // command names, in cobra's order
	}{
		{"run", []string{"run", "--", "true"}, []string{"run"}},
		{"help", []string{"help"}, []string{"doctor", "mcp", "run", "serve", "session", "template", "version"}},
		{"run after a flag", []string{"--help", "run"}, []string{"doctor", "mcp", "run", "serve", "session", "template", "version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range newRootCmd(tt.args).Commands() {
				got = append(got, c.Name())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("newRootCmd(%q) has commands %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// TestCompletionSeesEveryCommand: completing warden's first word offers
// the completion command and every other, as before run got its own tree.
func TestCompletionSeesEveryCommand(t *testing.T) {
	args := []string{"__complete", ""}
	root := newRootCmd(args)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("warden __complete: %v", err)
	}
	for _, want := range []string{"completion", "run", "template", "version"} {
		if !strings.Contains(out.String(), want+"\t") {
			t.Errorf("warden __complete '' = %q, want it to offer %s", out.String(), want)
		}
	}
}
