package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of warden itself, beside the program's own (see README).
const (
	exitWardenFailed = 125 // Warden could not run the program (bad input, host problem)
	exitTimeout      = 124 // the wall-clock limit killed the sandbox
)

// exitError carries an exit code up through cobra without printing twice.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// newRootCmd builds warden's command tree for args. `warden run`, which
// every one-shot sandbox starts, gets the run command alone and no
// completion command: cobra would otherwise build every other command and
// flag set, and the completion command's help texts, before it looks at
// args, which a run pays for in allocations and page faults and never
// uses (docs/performance.md, "The CLI's start"). Help, shell completion
// and every other command get the whole tree.
func newRootCmd(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:           "warden",
		Short:         "Run untrusted code in an isolated Linux sandbox",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Suggestions ("Did you mean this?") would make a bad command a
		// multi-line error; every warden error is one line.
		DisableSuggestions: true,
	}
	if len(args) > 0 && args[0] == "run" {
		root.CompletionOptions.DisableDefaultCmd = true
		root.AddCommand(newRunCmd())
		return root
	}
	root.AddCommand(newRunCmd(), newServeCmd(), newSessionCmd(), newMCPCmd(), newDoctorCmd(), newTemplateCmd(), newVersionCmd())
	return root
}

func execute(args []string) int {
	if handed, err := handOver(args); handed {
		fmt.Fprintln(os.Stderr, "warden: "+err.Error())
		return exitWardenFailed
	}
	root := newRootCmd(args)
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		msg := err.Error()
		if !strings.HasPrefix(msg, "warden: ") {
			msg = "warden: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		return exitWardenFailed
	}
}
