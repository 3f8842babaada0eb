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

func execute(args []string) int {
	if handed, err := handOver(args); handed {
		fmt.Fprintln(os.Stderr, "warden: "+err.Error())
		return exitWardenFailed
	}
	root := &cobra.Command{
		Use:           "warden",
		Short:         "Run untrusted code in an isolated Linux sandbox",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Suggestions ("Did you mean this?") would make a bad command a
		// multi-line error; every warden error is one line.
		DisableSuggestions: true,
	}
	root.AddCommand(newRunCmd(), newServeCmd(), newSessionCmd(), newMCPCmd(), newDoctorCmd(), newTemplateCmd(), newVersionCmd())
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
