//go:build slim

package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

func newServeCmd() *cobra.Command   { return handedToServer("serve", serveShort) }
func newSessionCmd() *cobra.Command { return handedToServer("session", sessionShort) }
func newMCPCmd() *cobra.Command     { return handedToServer("mcp", mcpShort) }

// handedCommands are the commands this build leaves to serverName.
var handedCommands = []string{"serve", "session", "mcp"}

// handedToServer stands in for a command the slim build leaves out: it
// parses nothing (its flags and --help are the full command's) and
// replaces this process with serverName (execServer).
func handedToServer(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return execServer(name, os.Args[1:])
		},
	}
}

// handOver hands to serverName what asks about a command this build
// leaves out in a way its stand-in cannot answer: `help serve` and shell
// completion (`__complete serve ...`), which need the full command's help
// and flags. It reports whether args were such a request, and returns
// only if they were not or the hand-over failed.
func handOver(args []string) (bool, error) {
	if len(args) < 2 || !slices.Contains(handedCommands, args[1]) {
		return false, nil
	}
	switch args[0] {
	case "help", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return true, execServer(args[1], args)
	}
	return false, nil
}

// execServer replaces this process with the trusted serverName beside
// warden (serverBinary), same arguments args, environment (plus this
// build's version, handoffEnv), descriptors and process id, so a
// supervisor or an MCP client sees one process as before. It returns
// only on failure.
func execServer(name string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: finding warden's own path: %w", name, err)
	}
	f, err := serverBinary(exe, name)
	if err != nil {
		return err
	}
	err = nsinit.ExecFD(f, append([]string{f.Name()}, args...), handoffEnviron())
	return fmt.Errorf("%s: starting %s: %w", name, f.Name(), err)
}
