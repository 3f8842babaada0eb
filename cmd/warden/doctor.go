package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/doctor"
)

func newDoctorCmd() *cobra.Command {
	var asJSON, leaks, microVMBoot bool
	var stateDir string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what this host supports, and how to fix what it lacks",
		Long: `Check every isolation layer warden needs on this host, as the current user,
and end with a real sandbox run. Each line is ok, warn or missing, with the fix.
Exits 1 when something a default run needs is missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if leaks {
				return reportLeaks(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, templateStoreDir(stateDir))
			}
			checks := doctor.Run(cmd.Context())
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("doctor: finding warden's own path: %w", err)
			}
			checks = append(checks, binaryChecks(cmd.Context(), exe)...)
			if microVMBoot {
				checks = append(checks, microVMBootCheck(cmd.Context(), exe))
			}
			if dir := templateStoreDir(stateDir); dir != "" {
				checks = append(checks, doctor.TemplateStore(dir))
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(out).Encode(checks); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				for _, c := range checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
					}
				}
				tw.Flush()
			}
			if !doctor.Healthy(checks) {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().StringVar(&stateDir, "state-dir", defaultStateDir(), "the state directory whose template store to report (as warden serve's)")
	cmd.Flags().BoolVar(&microVMBoot, "microvm-boot", false, "also boot one microVM (QEMU, the guest kernel, warden-init beside warden as its /init) and report its boot-to-hello time")
	cmd.Flags().BoolVar(&leaks, "leaks", false, "list what Wardens that are gone left behind (cgroups, processes, egress sockets); exit 1 if anything. Also notes, without failing, the gvisor and microvm roots of templates --state-dir's store does not hold (a cache warden template gc removes)")
	return cmd
}

// templateStoreDir is the template store of stateDir, or "" for none.
func templateStoreDir(stateDir string) string {
	if stateDir == "none" || stateDir == "" {
		return ""
	}
	return filepath.Join(stateDir, "templates")
}

// reportLeaks prints what dead Wardens left behind, one line each, and
// fails when there is anything; the gVisor roots of templates the store
// at templates does not hold follow as notes, which never fail.
func reportLeaks(out, errOut io.Writer, asJSON bool, templates string) error {
	found, err := doctor.Leaks()
	if err != nil {
		return fmt.Errorf("looking for leftovers: %w", err)
	}
	return printLeaks(out, errOut, asJSON, found, doctor.TemplateRoots(templates))
}

// printLeaks prints found (as a JSON list with asJSON) and notes (on
// errOut with asJSON, so out stays the list), and fails, with exit code
// 1, only when found is not empty.
func printLeaks(out, errOut io.Writer, asJSON bool, found, notes []doctor.Leak) error {
	noteOut := out
	if asJSON {
		noteOut = errOut
		if found == nil {
			found = []doctor.Leak{}
		}
		if err := json.NewEncoder(out).Encode(found); err != nil {
			return err
		}
	} else {
		if len(found) == 0 {
			fmt.Fprintln(out, "ok  nothing left behind by Wardens that are gone")
		}
		for _, l := range found {
			fmt.Fprintf(out, "leak  %s  %s: %s\n", l.Kind, l.What, l.Why)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(noteOut, "note  %s  %s: %s\n", n.Kind, n.What, n.Why)
	}
	if len(found) > 0 {
		return exitError{code: 1}
	}
	return nil
}
