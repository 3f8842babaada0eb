package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/template"
)

func newTemplateShareCmd(o *templateOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "share NAME all|TENANT[,TENANT]",
		Short: "Set which tenants may list and start sessions on a template",
		Long: `Share replaces whom template NAME is shared with: "all" (every tenant of every
server sharing this --state-dir) or tenant ids separated by commas (a key's
tenant id is the owner in warden serve's request log; "keyless" is the tenant
of a server without keys). To every other tenant the template answers as one
that does not exist. A commit made before Warden recorded sharing shows as
"unset" in warden template ls and is usable by no tenant until shared. Sessions
already running keep their template.`,
		Example: `  warden template share datasci-with-model 3f9a0c1d2b4e5f60
  warden template share team-base all`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			shareWith, err := template.ParseShare(args[1])
			if err != nil {
				return err
			}
			s, err := o.store()
			if err != nil {
				return err
			}
			t, err := s.Share(args[0], shareWith)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\tshared with %s\n", t.Name, t.ShareText())
			return err
		},
	}
}
