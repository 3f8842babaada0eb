//go:build slim

package main

import (
	"fmt"
	"os"

	"github.com/warden-sandbox/warden/internal/nsinit"

	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command   { return handedToServer("serve", serveShort) }
func newSessionCmd() *cobra.Command { return handedToServer("session", sessionShort) }
func newMCPCmd() *cobra.Command     { return handedToServer("mcp", mcpShort) }

// handedToServer stands in for a command the slim build leaves out: it
// parses nothing (its flags and --help are the full command's) and
// replaces this process with serverName, same arguments, environment,
// descriptors and process id, so a supervisor or an MCP client sees one
// process as before.
func handedToServer(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("%s: finding warden's own path: %w", name, err)
			}
			f, err := serverBinary(exe, name)
			if err != nil {
				return err
			}
			err = nsinit.ExecFD(f, append([]string{f.Name()}, os.Args[1:]...), os.Environ())
			return fmt.Errorf("%s: starting %s: %w", name, f.Name(), err)
		},
	}
}
