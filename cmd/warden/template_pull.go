//go:build !slim

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/template"
)

func newTemplatePullCmd(o *templateOpts) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: templatePullShort,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.store()
			if err != nil {
				return err
			}
			info, err := s.Pull(cmd.Context(), args[0], name, template.PullOptions{Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			return printInstalled(cmd, info)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the template's name (default: the repository's last element and tag)")
	return cmd
}

func newTemplateImportCmd(o *templateOpts) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "import FILE|DIR --name NAME",
		Short: templateImportShort,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return fmt.Errorf("import needs --name NAME")
			}
			s, err := o.store()
			if err != nil {
				return err
			}
			info, err := s.Import(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			return printInstalled(cmd, info)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the template's name")
	return cmd
}
