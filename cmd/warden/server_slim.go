//go:build slim

package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

func newServeCmd() *cobra.Command   { return handedToServer("serve", serveShort) }
func newSessionCmd() *cobra.Command { return handedToServer("session", sessionShort) }
func newMCPCmd() *cobra.Command     { return handedToServer("mcp", mcpShort) }

func newTemplatePullCmd(*templateOpts) *cobra.Command {
	return handedToServer("template pull", templatePullShort)
}

func newTemplateImportCmd(*templateOpts) *cobra.Command {
	return handedToServer("template import", templateImportShort)
}

// handedCommands are the commands this build leaves to serverName, each
// its path of command names below warden's.
var handedCommands = []string{"serve", "session", "mcp", "template pull", "template import"}

// handedToServer stands in for the command at path (handedCommands) the
// slim build leaves out: it parses nothing (its flags and --help are the
// full command's, and so are those of its parents) and replaces this
// process with serverName (execServer).
func handedToServer(path, short string) *cobra.Command {
	names := strings.Fields(path)
	return &cobra.Command{
		Use:                names[len(names)-1],
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return execServer(path, os.Args[1:])
		},
	}
}

// handOver hands to serverName what asks about a command this build
// leaves out in a way its stand-in cannot answer: `help serve`, `help
// template pull` and shell completion (`__complete serve ...`,
// `__complete template --state-dir DIR import ...`), which need the full
// command's help and flags. It reports whether args were
// such a request, and returns only if they were not or the hand-over
// failed.
func handOver(args []string) (bool, error) {
	if len(args) < 2 {
		return false, nil
	}
	switch args[0] {
	case "help", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
	default:
		return false, nil
	}
	// cobra's Find walks the command names as Execute does, past the
	// parents' flags (`template --state-dir DIR import`).
	root := newRootCmd(args[1:])
	cmd, _, err := root.Find(args[1:])
	if err != nil || cmd == nil {
		return false, nil
	}
	path := strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ")
	if !slices.Contains(handedCommands, path) {
		return false, nil
	}
	return true, execServer(path, args)
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
